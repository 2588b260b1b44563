package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/wire"
)

// httpError is an error with its answer.
type httpError struct {
	status int
	code   string
	msg    string
	field  string
	// Details of precondition_failed and conflict answers (see wire.ErrorDetail).
	latest    []byte
	failed    []wire.ConditionFailure
	conflicts []int
	// violation details a schema_violation (schemas.go).
	violation *wire.SchemaViolation
}

func (e *httpError) Error() string { return e.msg }

func invalid(field, format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

func tooLarge(field, format string, args ...any) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, code: wire.CodeTooLarge, field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *httpError {
	return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: fmt.Sprintf(format, args...)}
}

// fieldError turns a *cells.FieldError into a 400 naming the field, prefixed by where (the
// position in a batch, "cells[3]") when not empty.
func fieldError(where string, err error) *httpError {
	var fe *cells.FieldError
	if !errors.As(err, &fe) {
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, msg: err.Error()}
	}
	field := fe.Field
	if where != "" {
		field = where + "." + field
	}
	return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: field, msg: field + ": " + fe.Err.Error()}
}

// backendError maps the node's errors to answers.
func backendError(err error) *httpError {
	var (
		he *httpError
		sv *cluster.SchemaViolationError
	)
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &sv):
		return schemaViolation(sv.Violation, "cells", sv.Partial)
	case errors.Is(err, cluster.ErrUnknownDatastore):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: err.Error()}
	case errors.Is(err, command.ErrShardOutOfRange):
		// The shard's partition still refused it after the node re-routed it: a split or merge
		// of that partition is under way (a merge's freeze whose catalog change is still
		// pending, which the cluster completes or undoes). Nothing was applied.
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable,
			msg: err.Error() + " (a split or merge of the shard's partition is under way; retry)"}
	case errors.Is(err, cluster.ErrBadShard):
		return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: "shard", msg: err.Error()}
	case errors.Is(err, cluster.ErrIndeterminate):
		return &httpError{status: http.StatusGatewayTimeout, code: wire.CodeIndeterminate, msg: err.Error() + " (the write may still be applied; retrying is safe)"}
	case errors.Is(err, cluster.ErrUnavailable), errors.Is(err, cluster.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusServiceUnavailable, code: wire.CodeUnavailable, msg: err.Error()}
	}
	return &httpError{status: http.StatusInternalServerError, code: wire.CodeInternal, msg: err.Error()}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if writeFast(w, status, v) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *httpError) {
	if e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, wire.ErrorBody{Error: wire.ErrorDetail{Code: e.code, Message: e.msg, Field: e.field,
		LatestRefKey: e.latest, Failed: e.failed, Conflicts: e.conflicts, Violation: e.violation}})
}
