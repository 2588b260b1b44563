package security

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Error codes of the API's error envelope for refused credentials.
const (
	// CodeUnauthenticated: 401, no credentials or credentials not recognized.
	CodeUnauthenticated = "unauthenticated"
	// CodeForbidden: 403, the principal lacks the role the route needs (on that datastore).
	CodeForbidden = "forbidden"
)

// Refusal is why Check refused a request: its HTTP status (401 or 403), error code and message.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

// Check authenticates r with a and checks that the principal holds role on datastore ds ("" for
// none). It returns the principal, or the refusal to answer: 401 for ErrNoCredentials and
// ErrBadCredentials, 403 for a principal without the role. role RoleNone needs no credentials
// (the principal is then nil when none are sent).
func Check(a *Authenticator, r *http.Request, role Role, ds string) (*Principal, *Refusal) {
	p, err := a.Authenticate(r)
	if err != nil {
		if role == RoleNone && errors.Is(err, ErrNoCredentials) {
			return nil, nil
		}
		return nil, &Refusal{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: err.Error()}
	}
	if !p.Allows(role, ds) {
		what := "the " + string(role) + " role"
		if ds != "" && role != RoleAdmin && role != RoleMetrics {
			what += " on datastore " + ds
		}
		return p, &Refusal{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf("security: principal %q lacks %s", p.Name, what)}
	}
	return p, nil
}

// Auditor writes the audit log: one line per admin operation and one per refused request,
// each with the principal ("-" when unknown), method, path, remote address and status, at Info
// with msg "audit". Safe for concurrent use.
type Auditor struct{ log *slog.Logger }

// NewAuditor returns an Auditor writing to l (nil: slog.Default()), tagged component=audit.
func NewAuditor(l *slog.Logger) *Auditor {
	if l == nil {
		l = slog.Default()
	}
	return &Auditor{log: l.With("component", "audit")}
}

// Refused logs a refused request (401, 403, 429, or another refusal before the handler ran).
// A nil Auditor logs nothing.
func (a *Auditor) Refused(r *http.Request, p *Principal, status int, reason string) {
	if a == nil {
		return
	}
	a.log.Info("audit", "event", "refused", "principal", principalName(p), "method", r.Method, "path", r.URL.Path,
		"remote", remoteIP(r), "status", status, "reason", reason)
}

// Admin logs an admin operation that ran, with its answer's status and duration. A nil Auditor
// logs nothing.
func (a *Auditor) Admin(r *http.Request, p *Principal, status int, took time.Duration) {
	if a == nil {
		return
	}
	a.log.Info("audit", "event", "admin", "principal", principalName(p), "method", r.Method, "path", r.URL.Path,
		"query", r.URL.RawQuery, "remote", remoteIP(r), "status", status, "duration_ms", took.Milliseconds())
}

// StatusWriter is a ResponseWriter remembering the final status it wrote (200 when the handler
// wrote or flushed a body without one; informational 1xx headers are passed on, not recorded).
// The audit log and the API's request metrics read it. Unwrap lets http.ResponseController
// reach the connection (flushes, deadlines).
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records status, unless it is informational (1xx), and passes it on.
func (w *StatusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write passes b on, recording 200 if no status was written.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status returns the status written, 200 if none.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap returns the wrapped ResponseWriter.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes the wrapped writer when it can (streamed backups and long polls), recording 200
// if no status was written.
func (w *StatusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func principalName(p *Principal) string {
	if p == nil {
		return "-"
	}
	return p.Name
}

func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
