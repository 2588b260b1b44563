package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/wire"
)

// The HTTP helpers of the tests that run a cluster: requests to a node, and checks of the
// answers.

// session sends the requests of a test to the nodes of its cluster.
type session struct {
	c *clustertest.Cluster
}

// testingT is the test, or the *assert.CollectT of one try of an EventuallyWithT condition
// (which runs in a goroutine of its own, where a failure ends only that try).
type testingT interface {
	require.TestingT
	Helper()
}

// answer is an HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// tryDo sends a request to node (a node picked by the clock when node < 0) and reads the
// answer. It returns a transport error instead of failing a test: goroutines and the
// conditions of EventuallyWithT use it.
func (s *session) tryDo(node int, method, path, body string) (answer, error) {
	if node < 0 {
		node = int(time.Now().UnixNano() % 3)
	}
	req, err := http.NewRequest(method, s.c.URL(node)+path, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b}, err
}

// do is tryDo, failing t on a transport error.
func (s *session) do(t testingT, node int, method, path, body string) answer {
	t.Helper()
	a, err := s.tryDo(node, method, path, body)
	require.NoError(t, err, "%s %s", method, path)
	return a
}

// doRetry is do, sent again every 200ms while the answer is 503 unavailable (nothing was done:
// a partition without a leader for a moment, on a loaded machine), for up to 30s. A transport
// error fails t at once.
func (s *session) doRetry(t *testing.T, node int, method, path, body string) answer {
	t.Helper()
	a, _ := s.doRetryTries(t, node, method, path, body)
	return a
}

// doRetryTries is doRetry, also returning how many tries it took (more than 1: the first ones
// answered 503, and a write may have been done in part by them).
func (s *session) doRetryTries(t *testing.T, node int, method, path, body string) (answer, int) {
	t.Helper()
	// The condition runs in one goroutine at a time; a, err and tries are read only after
	// EventuallyWithT returns, once that goroutine has ended.
	var (
		a     answer
		err   error
		tries int
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tries++
		if a, err = s.tryDo(node, method, path, body); err != nil {
			return // ends the wait: fails below
		}
		assert.NotEqual(c, http.StatusServiceUnavailable, a.status, "%s %s: %s", method, path, a.body)
	}, 30*time.Second, 200*time.Millisecond, "%s %s: want an answer other than 503 unavailable within 30s", method, path)
	require.NoError(t, err, "%s %s", method, path)
	if tries > 1 {
		t.Logf("%s %s: answered %d after %d tries (503 before)", method, path, a.status, tries)
	}
	return a, tries
}

// poll is one try of a wait (in the condition of require.EventuallyWithT): it sends a request
// to node and, when the answer has status want, decodes it into v (unless v is nil) and
// returns true. A 503 unavailable fails only this try, through c, and the wait tries again.
// A transport error, another status or a body that does not decode is kept in *stop and poll
// returns false: the condition returns, which ends the wait, and the caller fails the test
// with *stop (require.NoError) as a plain request would.
func (s *session) poll(c *assert.CollectT, stop *error, node int, method, path, body string, want int, v any) bool {
	a, err := s.tryDo(node, method, path, body)
	switch {
	case err != nil:
		*stop = fmt.Errorf("%s %s: %w", method, path, err)
	case a.status == http.StatusServiceUnavailable:
		c.Errorf("%s %s: got 503 %s, want %d", method, path, a.body, want)
	default:
		if err = a.check(want); err == nil && v != nil {
			err = a.unmarshal(v)
		}
		if err != nil {
			*stop = fmt.Errorf("%s %s: %w", method, path, err)
		}
		return err == nil
	}
	return false
}

// unmarshal decodes the JSON body of a into v, strictly (no unknown field), with numbers in
// untyped values as json.Number.
func (a answer) unmarshal(v any) error {
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode %s into %T: %w", a.body, v, err)
	}
	return nil
}

// check returns an error unless a has status and a JSON body.
func (a answer) check(status int) error {
	if a.status != status {
		return fmt.Errorf("got status %d, want %d; body %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("got Content-Type %q, want application/json", ct)
	}
	return nil
}

// decode decodes the body of a into v as unmarshal does, failing t if it does not decode.
func (a answer) decode(t testingT, v any) {
	t.Helper()
	require.NoError(t, a.unmarshal(v))
}

// expect fails t unless a has status and a JSON body.
func (a answer) expect(t testingT, status int) answer {
	t.Helper()
	require.NoError(t, a.check(status))
	return a
}

// expectError checks an error answer's status, code and field, and that it has a message.
func (a answer) expectError(t testingT, status int, code, field string) {
	t.Helper()
	a.expect(t, status)
	var e wire.ErrorBody
	a.decode(t, &e)
	assert.Equal(t, code, e.Error.Code, "error code (%+v)", e.Error)
	assert.Equal(t, field, e.Error.Field, "error field (%+v)", e.Error)
	assert.NotEmpty(t, e.Error.Message, "error message (%+v)", e.Error)
}
