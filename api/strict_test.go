package api_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noRedirects is an HTTP client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// testStrict sends what the API cannot store as sent: each is a 400 (or 413) naming the field,
// never a redirect, and nothing is written.
func (s *session) testStrict(t *testing.T) {
	r := uuid.NewString()
	send := func(method, path, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, s.c.URL(0)+path, strings.NewReader(body))
		require.NoError(t, err)
		res, err := noRedirects.Do(req)
		require.NoError(t, err, "%s %s", method, path)
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return answer{status: res.StatusCode, header: res.Header, body: []byte(b.String())}
	}
	for _, path := range []string{
		"/v1/trips/cells//BASE/1",
		"/v1/trips/cells/" + r + "//1",
		"/v1/trips/../trips/cells/" + r + "/BASE/1",
		"/v1/trips/cells/" + r + "/./BASE/1",
		"/v1/trips/cells/" + r + "/BASE/1/",
		"/v1/trips/cells/" + r + "/../../../etc/passwd",
	} {
		send("PUT", path, `{"a":1}`).expectError(t, 400, "invalid_argument", "path")
	}
	for name, body := range map[string]string{
		"0xff 0xfe":                "{\"a\":\"\xff\xfe\"}",
		"overlong 0xc0 0xaf":       "{\"a\":\"\xc0\xaf\"}",
		"latin-1 (M\xfcnchen)":     "{\"city\":\"M\xfcnchen\"}",
		"invalid UTF-8 in a key":   "{\"\xff\":1}",
		"a lone continuation byte": "{\"a\":\"\x80\"}",
	} {
		t.Run(name, func(t *testing.T) {
			send("PUT", "/v1/trips/cells/"+r+"/BASE/1", body).expectError(t, 400, "invalid_argument", "body")
			send("POST", "/v1/trips/cells", `{"cells":[{"row_key":"`+r+`","column_key":"BASE","ref_key":1,"body":`+body+`}]}`).expectError(t, 400, "invalid_argument", "body")
		})
	}
	send("GET", "/v1/trips/cells/"+r+"/BASE/1", "").expectError(t, 404, "not_found", "")
	send("GET", "/v1/trips/shards/0/cells?location=%ff", "").expectError(t, 400, "invalid_argument", "location")
	send("GET", "/v1/trips/shards/0/cells?after=5", "").expectError(t, 400, "invalid_argument", "after")
	send("PUT", "/v1/trips/cells/"+r+"/BASE/1?if_latest=1", `{"a":1}`).expectError(t, 400, "invalid_argument", "if_latest")

	// Expect: 100-continue with a Content-Length over the limit: 413 at once, no 100 Continue.
	u, err := url.Parse(s.c.URL(0))
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "PUT /v1/trips/cells/%s/BASE/1 HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", r, u.Host, 20<<20)
	require.NoError(t, err)
	status, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err, "the answer's status line")
	assert.True(t, strings.HasPrefix(status, "HTTP/1.1 413"), "Expect: 100-continue over the limit: got %q, want 413 at once", strings.TrimSpace(status))
}
