package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/wire"
)

// endpoints is the state shared by a Client and its WithDatastore copies: the nodes, the
// transport, the rotating start index and the cool-downs. All of it is safe for concurrent use.
type endpoints struct {
	urls []string // base URLs without a trailing slash
	http *http.Client
	next atomic.Uint64
	// downUntil[i] is the time (Unix nanoseconds) until which urls[i] is tried last; 0 if healthy.
	downUntil []atomic.Int64
	// routes is the leader routing learned from answers; nil when Config.NoLeaderRouting.
	routes *leaderRoutes
}

// order returns the endpoint indexes to try in one call: round robin from a rotating start, the
// endpoints in cool-down moved to the end (in the same rotation order).
func (e *endpoints) order(now time.Time) []int {
	n := len(e.urls)
	start := int((e.next.Add(1) - 1) % uint64(n))
	out := make([]int, 0, n)
	var cooling []int
	for i := range n {
		ep := (start + i) % n
		if e.downUntil[ep].Load() > now.UnixNano() {
			cooling = append(cooling, ep)
		} else {
			out = append(out, ep)
		}
	}
	return append(out, cooling...)
}

func (e *endpoints) markDown(ep int, now time.Time) {
	e.downUntil[ep].Store(now.Add(EndpointCooldown).UnixNano())
}

func (e *endpoints) markUp(ep int) {
	if e.downUntil[ep].Load() != 0 {
		e.downUntil[ep].Store(0)
	}
}

// retryPolicy says which failed attempts of a write are retried (see the package
// documentation, "Retries and failover", and admin.go).
type retryPolicy int

const (
	// retryWrite: a cell or index write: idempotent, retried after anything but a 4xx or a 500.
	retryWrite retryPolicy = iota
	// retryUnstarted: an admin change that must not run twice by accident: retried only when it
	// certainly did not start (the request was not sent; 503, 429 or 408 answers).
	retryUnstarted
	// retryIdempotent: an admin change the caller declared idempotent (AdminIdempotent):
	// retried after anything but a 4xx, 500 included.
	retryIdempotent
)

// request is one API call, sent as is on every attempt.
type request struct {
	op     string // API operation, for error messages ("put_cell")
	method string
	path   string // escaped, starting with "/"
	query  url.Values
	body   []byte // JSON, or nil
	write  bool   // retried as a write (see policy); may end indeterminate
	policy retryPolicy
	ok     []int // success statuses
	// extra lengthens the attempt's RequestTimeout (a long poll's wait).
	extra time.Duration
	// timeout, when positive, bounds an attempt instead of RequestTimeout; when negative only
	// ctx bounds it (a stream).
	timeout time.Duration
	// newBody, when set, gives each attempt its body instead of body (a stream of
	// contentLength bytes of type contentType).
	newBody       func() io.Reader
	contentLength int64
	contentType   string
	// stream, when set, consumes a success answer's body instead of it being read into
	// memory; its error ends the call (the answer has started: no retry).
	stream func(resp *http.Response) error
	// lastEndpoint, when set, receives the base URL of each attempt's endpoint.
	lastEndpoint *string
	// accept is the Accept header; "" means application/json.
	accept string
	// idempotencyKey is sent as Idempotency-Key on writes: it lets net/http replay the request
	// on a reused keep-alive connection that the server had closed before reading it.
	idempotencyKey string
	// routeDS and routeRow, when routeDS is set, name the one row a leader-only request is
	// about: it goes first to the row's leader when the client knows it (see routing.go).
	routeDS  string
	routeRow uuid.UUID
	// sticky, when not empty, picks the endpoint tried first by its hash, unless it is in
	// cool-down: the requests of one ordered stream (WithOrder) go to the same node.
	sticky string
}

// answer is a success answer: its status and whole body.
type answer struct {
	status   int
	body     []byte
	endpoint string
}

// attemptResult is the outcome of one attempt.
type attemptResult struct {
	ans          answer
	err          error // nil on success
	retry        bool  // worth another attempt (on the next endpoint)
	maybeApplied bool  // a write that may have been applied
	failed       bool  // the endpoint goes into cool-down
	retryAfter   time.Duration
}

// do runs r with retries and failover (see the package documentation) and returns the first
// success answer. Errors are described in the package documentation.
func (c *Client) do(ctx context.Context, r *request) (answer, error) {
	if r.write && r.policy != retryUnstarted && r.idempotencyKey == "" {
		r.idempotencyKey = newKey()
	}
	if err := ctx.Err(); err != nil {
		return answer{}, c.ctxError(r, err, false, nil)
	}
	order := c.eps.order(time.Now())
	routed := r.routeDS != "" && c.eps.routes != nil
	if routed {
		if ep := c.eps.routes.preferred(r.routeDS, r.routeRow); ep >= 0 && ep < len(order) &&
			c.eps.downUntil[ep].Load() <= time.Now().UnixNano() {
			if i := slices.Index(order, ep); i > 0 {
				copy(order[1:i+1], order[:i])
				order[0] = ep
			}
		}
	}
	if r.sticky != "" {
		h := fnv.New32a()
		h.Write([]byte(r.sticky))
		if ep := int(h.Sum32() % uint32(len(order))); c.eps.downUntil[ep].Load() <= time.Now().UnixNano() {
			if i := slices.Index(order, ep); i > 0 {
				copy(order[1:i+1], order[:i])
				order[0] = ep
			}
		}
	}
	var (
		last       error // error of the latest attempt
		maybe      error // error of the latest attempt that may have applied the write
		retryAfter time.Duration
		attempts   int
	)
	for attempts < c.cfg.MaxAttempts {
		if attempts > 0 {
			if err := sleep(ctx, c.backoff(attempts, retryAfter)); err != nil {
				return answer{}, c.ctxError(r, err, maybe != nil, last)
			}
		}
		ep := order[attempts%len(order)]
		attempts++
		if r.lastEndpoint != nil {
			*r.lastEndpoint = c.eps.urls[ep]
		}
		res := c.attempt(ctx, c.eps.urls[ep], r)
		if res.err == nil {
			c.eps.markUp(ep)
			return res.ans, nil
		}
		if err := ctx.Err(); err != nil {
			return answer{}, c.ctxError(r, err, maybe != nil || res.maybeApplied, res.err)
		}
		if res.failed {
			c.eps.markDown(ep, time.Now())
			if routed {
				c.eps.routes.forget(r.routeDS, r.routeRow, ep)
			}
		}
		last = res.err
		if res.maybeApplied {
			maybe = res.err
		}
		if !res.retry {
			break
		}
		retryAfter = res.retryAfter
	}
	if r.write && maybe != nil && !errors.Is(last, ErrIndeterminate) && !definitive(last) {
		// last (unavailable, say) is kept as text only: the call is indeterminate, and wraps
		// no other class (see Errors).
		return answer{}, fmt.Errorf("client: %s: gave up after %d attempts: %w; last attempt: %v",
			r.op, attempts, maybe, last)
	}
	if attempts == 1 {
		return answer{}, fmt.Errorf("client: %s: %w", r.op, last)
	}
	return answer{}, fmt.Errorf("client: %s: gave up after %d attempts: %w", r.op, attempts, last)
}

// definitive reports whether err is an answer that settles a write whatever earlier attempts
// did: a 4xx (a conflict proves the stored body is not ours; invalid arguments were invalid
// before too).
func definitive(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500
}

// ctxError is the error of a call whose ctx ended: ctxErr wrapped, and ErrIndeterminate too for
// a write that may have been applied.
func (c *Client) ctxError(r *request, ctxErr error, maybeApplied bool, last error) error {
	if r.write && maybeApplied {
		return fmt.Errorf("client: %s: %w: %w", r.op, ErrIndeterminate, ctxErr)
	}
	if last != nil {
		// The call ended with ctx: last attempt's answer is kept as text only, so that the
		// error wraps ctx's error and no class of an attempt it outlived.
		return fmt.Errorf("client: %s: %w (last attempt: %v)", r.op, ctxErr, last)
	}
	return fmt.Errorf("client: %s: %w", r.op, ctxErr)
}

// attempt sends r once to base, within RequestTimeout, and classifies the outcome.
func (c *Client) attempt(ctx context.Context, base string, r *request) attemptResult {
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	timeout := c.cfg.RequestTimeout
	if r.timeout != 0 {
		timeout = r.timeout
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout+r.extra)
	}
	defer cancel()
	// sent is set once request headers were written to a connection: from then on a write may
	// reach the server. Dial failures never set it.
	var sent atomic.Bool
	actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{
		WroteHeaders: func() { sent.Store(true) },
	})
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	if r.newBody != nil {
		body = r.newBody()
	}
	req, err := http.NewRequestWithContext(actx, r.method, u, body)
	if err != nil {
		return attemptResult{err: fmt.Errorf("client: %s %s: %w", r.method, u, err)}
	}
	if r.accept == "" {
		req.Header.Set("Accept", "application/json")
	} else {
		req.Header.Set("Accept", r.accept)
	}
	switch {
	case r.newBody != nil:
		req.ContentLength = r.contentLength
		req.Header.Set("Content-Type", r.contentType)
	case r.body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	resp, err := c.eps.http.Do(req)
	if err == nil {
		if r.routeDS != "" && c.eps.routes != nil {
			c.eps.routes.learn(r.routeDS, r.routeRow, resp.Header)
		}
		if r.stream != nil && slices.Contains(r.ok, resp.StatusCode) {
			err := r.stream(resp)
			resp.Body.Close()
			return attemptResult{ans: answer{status: resp.StatusCode, endpoint: base}, err: err}
		}
		var data []byte
		data, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			return c.classify(r, base, resp, data)
		}
	}
	res := attemptResult{retry: true, failed: true, maybeApplied: r.write && sent.Load()}
	if res.maybeApplied && r.policy == retryUnstarted {
		res.retry = false
	}
	what := err.Error()
	if ctx.Err() == nil && actx.Err() != nil {
		what = fmt.Sprintf("%s %s: no complete answer within %s", r.method, u, timeout+r.extra)
	}
	if res.maybeApplied {
		res.err = fmt.Errorf("client: %w: %s", ErrIndeterminate, what)
	} else {
		res.err = fmt.Errorf("client: %w: %s", ErrUnavailable, what)
	}
	return res
}

// classify turns a complete HTTP answer into an attempt result.
func (c *Client) classify(r *request, base string, resp *http.Response, data []byte) attemptResult {
	st := resp.StatusCode
	if slices.Contains(r.ok, st) {
		return attemptResult{ans: answer{status: st, body: data, endpoint: base}}
	}
	if st < 400 {
		return attemptResult{err: fmt.Errorf("client: %s %s%s: %w: unexpected status %d",
			r.method, base, r.path, ErrBadResponse, st)}
	}
	ae := newAPIError(st, data, base, resp.Header.Get("Retry-After"))
	res := attemptResult{err: ae, retryAfter: ae.RetryAfter}
	switch {
	case st == http.StatusServiceUnavailable:
		res.retry, res.failed = true, true
	case st == http.StatusTooManyRequests || st == http.StatusRequestTimeout:
		res.retry = true
	case st == http.StatusGatewayTimeout:
		res.retry, res.failed = true, true
		if r.write {
			res.maybeApplied = true
			res.retry = r.policy != retryUnstarted
		} else {
			ae.sentinel = ErrUnavailable
		}
	case st >= 500:
		res.failed = true
		res.retry = !r.write || r.policy == retryIdempotent
	}
	return res
}

// newAPIError builds the error of a failure answer from its wire.ErrorBody, or from its status
// when the body is not one.
func newAPIError(status int, data []byte, endpoint, retryAfter string) *APIError {
	ae := &APIError{StatusCode: status, Endpoint: endpoint, RetryAfter: parseRetryAfter(retryAfter, time.Now())}
	var eb wire.ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		ae.Code, ae.Message, ae.Field = eb.Error.Code, eb.Error.Message, eb.Error.Field
		ae.Failed, ae.Conflicts, ae.Violation = eb.Error.Failed, eb.Error.Conflicts, eb.Error.Violation
		return ae
	}
	ae.Code = codeForStatus(status)
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	ae.Message = msg
	return ae
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
// It returns 0 for an absent, invalid or past value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait before retry n (n >= 1): full jitter, uniform in
// [0, min(BackoffMax, BackoffBase*2^(n-1))), raised to retryAfter capped at BackoffMax.
// "Exponential Backoff And Jitter", AWS Architecture Blog, 2015.
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	ceil := min(c.cfg.BackoffBase, c.cfg.BackoffMax)
	for i := 1; i < n && ceil < c.cfg.BackoffMax; i++ {
		if ceil > c.cfg.BackoffMax/2 {
			ceil = c.cfg.BackoffMax
			break
		}
		ceil *= 2
	}
	var d time.Duration
	if ceil > 0 {
		d = rand.N(ceil)
	}
	if ra := min(retryAfter, c.cfg.BackoffMax); ra > d {
		d = ra
	}
	return d
}

// sleep waits d or until ctx is done, whichever is first, and returns ctx.Err() in the second case.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newKey returns a new idempotency key: a time-ordered UUIDv7, which the server records at the
// end of its table's index (a random v4 if the clock cannot be read).
func newKey() string {
	if id, err := uuid.NewV7(); err == nil {
		return id.String()
	}
	return uuid.NewString()
}
