package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// The parsing of requests: parse reads what the handlers under /v1/{ds}/ have in common, the
// functions below the parts some of them read. Each refuses a bad part with the 4xx naming the
// field at fault.

// want says what parse reads of a request besides its datastore.
type want struct {
	// idempotencyKey reads the Idempotency-Key header (writes).
	idempotencyKey bool
	// maxBody is the limit of the request's body in bytes, read by request.body or
	// request.decode; 0 for a route that reads no body.
	maxBody int64
}

// request is a request under /v1/{ds}/ as parse read it.
type request struct {
	r    *http.Request
	ds   string                  // the {ds} path value, a datastore of the topology
	spec *topology.DatastoreSpec // its spec
	// idempotencyKey is the Idempotency-Key header when asked for ("" when absent).
	idempotencyKey string
	maxBody        int64
}

// parse reads the common parts of a request under /v1/{ds}/, in this order: the datastore of
// the path (404 not_found when the topology has none), then the Idempotency-Key header when
// w.idempotencyKey (400 naming it). The body is not read yet: request.body and request.decode
// read it, once the handler has checked the rest of the path and the query.
func (s *Server) parse(r *http.Request, w want) (*request, error) {
	ds := r.PathValue("ds")
	spec, err := s.b.Node.Datastore(ds)
	if err != nil {
		return nil, notFound("unknown datastore %q", ds)
	}
	q := &request{r: r, ds: ds, spec: spec, maxBody: w.maxBody}
	if w.idempotencyKey {
		k, he := idempotencyKey(r)
		if he != nil {
			return nil, he
		}
		q.idempotencyKey = k
	}
	return q, nil
}

// body reads the request's body (see readBody: at most want.maxBody bytes of valid UTF-8,
// else a 413 or 400 naming body).
func (q *request) body() ([]byte, error) {
	b, he := readBody(q.r, q.maxBody, "body")
	if he != nil {
		return nil, he
	}
	return b, nil
}

// decode reads the body and decodes it into v strictly (decodeStrict: an unknown field, a
// value of the wrong type or data after the JSON value is a 400 naming the field). An empty
// body is refused ("body"); with emptyOK it leaves v as it is.
func (q *request) decode(v any, emptyOK bool) error {
	b, err := q.body()
	if err != nil {
		return err
	}
	return decodeBody(b, v, emptyOK)
}

// decodeBody decodes b into v as request.decode does.
func decodeBody(b []byte, v any, emptyOK bool) error {
	if emptyOK && len(b) == 0 {
		return nil
	}
	if he := decodeStrict(b, v); he != nil {
		return he
	}
	return nil
}

// idempotencyKey returns the request's Idempotency-Key header ("" when absent): 1 to
// cluster.MaxIdempotencyKeyBytes printable ASCII bytes.
func idempotencyKey(r *http.Request) (string, *httpError) {
	vs := r.Header.Values(wire.HeaderIdempotencyKey)
	if len(vs) == 0 {
		return "", nil
	}
	field := "header " + wire.HeaderIdempotencyKey
	if len(vs) > 1 {
		return "", invalid(field, "given %d times", len(vs))
	}
	k := vs[0]
	if k == "" || len(k) > cluster.MaxIdempotencyKeyBytes {
		return "", invalid(field, "%d bytes, want 1 to %d", len(k), cluster.MaxIdempotencyKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", invalid(field, "byte %d is not printable ASCII", i)
		}
	}
	return k, nil
}

func parseRefKey(field, s string) (int64, *httpError) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, invalid(field, "%q is not a non-negative integer", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid(field, "%q is not a non-negative 64-bit integer", s)
	}
	return v, nil
}

// parseKey validates row key, column key and, when ref != nil, ref key from their text forms.
func parseKey(where, row, col string, ref *string) (cells.Key, *httpError) {
	var k cells.Key
	rk, err := cells.ParseRowKey(row)
	if err != nil {
		return k, fieldError(where, err)
	}
	if err := cells.ValidateColumnKey(col); err != nil {
		return k, fieldError(where, err)
	}
	k.RowKey, k.ColumnKey = rk, col
	if ref != nil {
		field := "ref_key"
		if where != "" {
			field = where + ".ref_key"
		}
		v, he := parseRefKey(field, *ref)
		if he != nil {
			return k, he
		}
		k.RefKey = v
	}
	return k, nil
}

// consistency reads the consistency query parameter: strong (the default) or stale, and with
// stale the optional max_staleness (consistencyOf).
func consistency(r *http.Request) (cluster.Consistency, *httpError) {
	q := r.URL.Query()
	var bound *string
	if q.Has("max_staleness") {
		b := q.Get("max_staleness")
		bound = &b
	}
	return consistencyOf(q.Get("consistency"), bound)
}

// consistencyOf reads a consistency: c strong ("" too) or stale, and with stale, when bound
// is given, a Go duration such as 2s or 500ms, above 0 and at most
// partition.MaxStalenessLimit: a bounded stale read (cluster.BoundedStale). It refuses anything
// else with a 400 naming consistency or max_staleness.
func consistencyOf(c string, bound *string) (cluster.Consistency, *httpError) {
	var out cluster.Consistency
	switch c {
	case "", string(cluster.Strong):
		out = cluster.Strong
	case string(cluster.Stale):
		out = cluster.Stale
	default:
		return "", invalid("consistency", "%q must be strong or stale", c)
	}
	if bound == nil {
		return out, nil
	}
	if out != cluster.Stale {
		return "", invalid("max_staleness", "bounds a stale read: give consistency=stale with it")
	}
	d, err := time.ParseDuration(*bound)
	if err != nil || d <= 0 || d > partition.MaxStalenessLimit {
		return "", invalid("max_staleness", "%q must be a duration above 0 and at most %s (e.g. 2s, 500ms)", *bound, partition.MaxStalenessLimit)
	}
	return cluster.BoundedStale(d), nil
}

// readBody reads a JSON request body of at most limit bytes: a declared Content-Length over the
// limit is a 413 naming field at once (nothing read), more bytes than the limit a 413 after
// reading limit+1, and a body that is not valid UTF-8 a 400 naming field.
func readBody(r *http.Request, limit int64, field string) ([]byte, *httpError) {
	if he := tooLargeDeclared(r, limit, field); he != nil {
		return nil, he
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid(field, "reading the request body: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(field, "larger than %d bytes", limit)
	}
	if he := checkUTF8(field, b); he != nil {
		return nil, he
	}
	return b, nil
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and trailing data.
func decodeStrict(b []byte, v any) *httpError {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return invalid(ute.Field, "has type %s, want %s", ute.Value, ute.Type)
		}
		return invalid("body", "%v", err)
	}
	if dec.More() {
		return invalid("body", "data after the JSON value")
	}
	return nil
}
