package client

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/wire"
)

// Errors returned by the client. Every error of a call wraps exactly the sentinels that describe
// it, so callers test them with errors.Is; an answer of a node is also an *APIError (errors.As).
// When a write returns ErrIndeterminate it does not also wrap ErrUnavailable, whatever the last
// attempt said: an earlier attempt may have applied it.
var (
	// ErrNotFound: the cell, row or datastore does not exist (404 not_found).
	ErrNotFound = errors.New("client: not found")
	// ErrConflict: a cell with this key and another body is stored (409 conflict). Nothing was
	// written. Final: retrying cannot succeed.
	ErrConflict = errors.New("client: conflict")
	// ErrInvalidArgument: the request breaks the data model or the API (400 invalid_argument), or
	// the client refused to send it (then it also wraps a *cells.FieldError naming the field).
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrTooLarge: the request or a body is larger than the server accepts (413 too_large).
	ErrTooLarge = errors.New("client: too large")
	// ErrUnavailable: no node could serve the request within the attempts: no leader or no quorum
	// (503, 429, 408), connection errors, or (for reads) timeouts and 504 answers. A write that
	// returns it was not applied; any call returning it is safe to retry later.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrIndeterminate: a write may or may not have been applied (a 504 indeterminate answer, an
	// attempt that timed out or lost its connection after the request was sent, or ctx ending
	// while a request was in flight). Retrying the same write is safe: it is idempotent, and a
	// retry reports StatusExists if the first one was applied. Reads never return it.
	ErrIndeterminate = errors.New("client: indeterminate")
	// ErrInternal: the server failed (500 internal, or another 5xx not listed here). For a write
	// it does not say whether the write was applied; retrying is safe.
	ErrInternal = errors.New("client: internal server error")
	// ErrBadResponse: a node answered with something that breaks the API contract (undecodable
	// JSON, a result count or key that does not match the request, an unknown status). For a
	// write the answer was a success status, so the write was most likely applied.
	ErrBadResponse = errors.New("client: bad response")
	// ErrPreconditionFailed: a conditional write or a transaction whose conditions did not hold
	// when it was applied (412 precondition_failed); nothing was written. The error is a
	// *PreconditionError naming the failed conditions and the columns' latest ref keys. Final:
	// read the column again before another attempt.
	ErrPreconditionFailed = errors.New("client: precondition failed")
	// ErrKeyReused: the write's idempotency key was used for a different request within the
	// server's window (422 idempotency_key_reused); nothing was written.
	ErrKeyReused = errors.New("client: idempotency key reused")
	// ErrSchemaViolation: a write was refused because a cell's body violates its column's
	// latest schema (400 schema_violation). The *APIError's Violation names the cell, the JSON
	// pointer of the failing field and the schema version. It wraps ErrInvalidArgument: nothing
	// was written (unless the message says cells of other partitions may have been, when the
	// node learned of a new schema while the request was on its way). Final: retrying cannot
	// succeed.
	ErrSchemaViolation = fmt.Errorf("client: schema violation: %w", ErrInvalidArgument)
	// ErrInvalidConfig: Config.Validate found a field out of range.
	ErrInvalidConfig = errors.New("client: invalid config")
)

// APIError is an error answer of a node: an HTTP status outside the call's success statuses,
// with the wire.ErrorBody it carried. Unwrap returns the sentinel matching Code (ErrNotFound for
// "not_found", and so on), or matching StatusCode when Code is unknown, so errors.Is works on
// it; it returns nil for a code and status with no sentinel (405 method_not_allowed).
//
// When the answer carried no wire.ErrorBody (a proxy's page, an empty body), Code is derived from
// StatusCode ("" when no code fits, such as for 429) and Message holds the start of the body.
type APIError struct {
	// StatusCode is the HTTP status, such as 404.
	StatusCode int
	// Code is wire.ErrorDetail.Code, such as wire.CodeNotFound.
	Code string
	// Message is the server's explanation, for people.
	Message string
	// Field names the request field at fault for invalid_argument and too_large, such as
	// "cells[3].ref_key"; empty otherwise.
	Field string
	// Endpoint is the base URL of the node that answered.
	Endpoint string
	// RetryAfter is the wait the node asked for in a Retry-After header (503, 429), or 0.
	RetryAfter time.Duration
	// Violation details a schema_violation (ErrSchemaViolation); nil otherwise.
	Violation *wire.SchemaViolation
	// Failed lists the conditions that did not hold (precondition_failed; a conditional
	// put_cell's one condition has index 0).
	Failed []wire.ConditionFailure
	// Conflicts lists the writes of a transaction whose key holds another body (conflict).
	Conflicts []int

	// sentinel overrides the mapping from Code (a 504 on a read is ErrUnavailable).
	sentinel error
}

// Error returns "client: <status> <code> from <endpoint>: <message> (field <field>)".
func (e *APIError) Error() string {
	s := fmt.Sprintf("client: %d %s from %s: %s", e.StatusCode, e.Code, e.Endpoint, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// Unwrap returns the sentinel error of e (see APIError), or nil.
func (e *APIError) Unwrap() error {
	if e.sentinel != nil {
		return e.sentinel
	}
	return sentinelFor(e.Code, e.StatusCode)
}

// sentinelFor maps an error code, or failing that an HTTP status, to its sentinel.
func sentinelFor(code string, status int) error {
	switch code {
	case wire.CodeInvalidArgument:
		return ErrInvalidArgument
	case wire.CodeNotFound:
		return ErrNotFound
	case wire.CodeConflict:
		return ErrConflict
	case wire.CodeTooLarge:
		return ErrTooLarge
	case wire.CodeUnavailable:
		return ErrUnavailable
	case wire.CodeIndeterminate:
		return ErrIndeterminate
	case wire.CodeInternal:
		return ErrInternal
	case wire.CodeSchemaViolation:
		return ErrSchemaViolation
	case wire.CodeMethod:
		return nil
	case wire.CodePreconditionFailed:
		return ErrPreconditionFailed
	case wire.CodeIdempotencyKeyReused:
		return ErrKeyReused
	case wire.CodeCrossPartition:
		return ErrInvalidArgument
	}
	switch status {
	case http.StatusBadRequest:
		return ErrInvalidArgument
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusRequestEntityTooLarge:
		return ErrTooLarge
	case http.StatusPreconditionFailed:
		return ErrPreconditionFailed
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout:
		return ErrUnavailable
	case http.StatusGatewayTimeout:
		return ErrIndeterminate
	}
	if status >= 500 {
		return ErrInternal
	}
	return nil
}

// codeForStatus is the error code a status stands for when the answer had no wire.ErrorBody.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return wire.CodeInvalidArgument
	case http.StatusNotFound:
		return wire.CodeNotFound
	case http.StatusMethodNotAllowed:
		return wire.CodeMethod
	case http.StatusConflict:
		return wire.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return wire.CodeTooLarge
	case http.StatusServiceUnavailable:
		return wire.CodeUnavailable
	case http.StatusGatewayTimeout:
		return wire.CodeIndeterminate
	}
	if status >= 500 {
		return wire.CodeInternal
	}
	return ""
}

// PreconditionError is the error of a conditional write or a transaction whose conditions did
// not hold (errors.Is(err, ErrPreconditionFailed)). Failures has one entry per failed
// condition: its index in the request and the column's latest ref key when the write was
// applied (nil: the column has no cell).
type PreconditionError struct {
	*APIError
	Failures []wire.ConditionFailure
}

// Unwrap returns the APIError (which unwraps to ErrPreconditionFailed).
func (e *PreconditionError) Unwrap() error { return e.APIError }

// Conditions says which conditions failed and what the columns' latest ref keys were:
// "condition 0: the column's latest ref key is 3; condition 2: the column's latest ref key is
// none (no cell)".
func (e *PreconditionError) Conditions() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		latest := "none (no cell)"
		if f.LatestRefKey != nil {
			latest = strconv.FormatInt(*f.LatestRefKey, 10)
		}
		parts[i] = fmt.Sprintf("condition %d: the column's latest ref key is %s", f.Index, latest)
	}
	return strings.Join(parts, "; ")
}

// asPrecondition turns a precondition_failed APIError into a *PreconditionError; other errors
// are returned as they are.
func asPrecondition(err error) error {
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == wire.CodePreconditionFailed {
		return &PreconditionError{APIError: ae, Failures: ae.Failed}
	}
	return err
}
