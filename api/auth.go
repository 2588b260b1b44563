package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/security"
)

// Roles of the routes (Config.Auth):
//
//	none   GET /healthz, GET /readyz, GET /console (a static page; what it reads needs admin)
//	read   every other GET or HEAD under /v1/{ds}/ and GET /v1/cluster; the reads sent as POST
//	       (cells/get, shards/cells, indexes/{index}/query); consumer group commands
//	       (groups/{group}/{op}: a consumer commits its offsets with read); unknown routes
//	write  PUT and POST of cells, transactions, DELETE of a row (erasure)
//	admin  /v1/admin/... (membership, backup, restore), index definitions, aliases and drops,
//	       schema registration
//	replicator  a schema registration with ?origin= (a version replicated from another
//	       cluster); put_cells with "origin" and erasures with ?origin= also need it (checked by
//	       their handlers, as write routes)
//
// A principal's datastores scope read and write by the {ds} of the path; admin is cluster-wide.

// adminPatterns are the routes under /v1/{ds}/ that need admin, by "METHOD pattern".
var adminPatterns = map[string]bool{
	"POST /v1/{ds}/indexes":                              true,
	"POST /v1/{ds}/indexes/{index}/alias":                true,
	"DELETE /v1/{ds}/indexes/{index}/versions/{version}": true,
	"PUT /v1/{ds}/schemas/{col}":                         true,
}

// readPosts are the POST routes that only read (or, for consumer groups, move a consumer's
// own offsets).
var readPosts = map[string]bool{
	"/v1/{ds}/cells/get":             true,
	"/v1/{ds}/shards/cells":          true,
	"/v1/{ds}/indexes/{index}/query": true,
	"/v1/{ds}/groups/{group}/{op}":   true,
}

// routeRole returns the role a request needs, given the pattern the mux matched for it ("" or
// "/" when no route matched), and the datastore the role applies to ("" for none).
func routeRole(pattern string, r *http.Request) (security.Role, string) {
	if _, p, ok := strings.Cut(pattern, " "); ok { // "GET /console": method patterns
		pattern = p
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	switch {
	case pattern == "/healthz" || pattern == "/readyz" || strings.HasPrefix(pattern, "/console"):
		// The console is a static page holding no data: every route it reads needs admin,
		// with the token it asks for.
		return security.RoleNone, ""
	case strings.HasPrefix(pattern, "/v1/admin/"):
		return security.RoleAdmin, ""
	case !strings.HasPrefix(pattern, "/v1/{ds}/"):
		return security.RoleRead, ""
	}
	ds := ""
	if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"); ok {
		ds, _, _ = strings.Cut(rest, "/")
	}
	switch {
	case method == http.MethodPut && pattern == "/v1/{ds}/schemas/{col}" && r.URL.Query().Has("origin"):
		// A schema version replicated from another cluster: a peer's replicator registers it.
		return security.RoleReplicator, ds
	case adminPatterns[method+" "+pattern]:
		return security.RoleAdmin, ""
	case method == http.MethodGet || readPosts[pattern]:
		return security.RoleRead, ds
	}
	return security.RoleWrite, ds
}

// authorize authenticates r and checks its route's role (Config.Auth). It answers and audits
// a refusal and returns ok false; otherwise it returns the request carrying its principal
// (security.PrincipalFrom) and, for an admin route, a writer whose status the audit line
// reports once the handler returns (call done).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func(), bool) {
	_, pattern := s.mux.Handler(r)
	role, ds := routeRole(pattern, r)
	p, ref := security.Check(s.cfg.Auth, r, role, ds)
	if ref != nil {
		s.cfg.Audit.Refused(r, p, ref.Status, ref.Message)
		writeRefusal(w, ref)
		return w, r, nil, false
	}
	if p != nil {
		r = r.WithContext(security.WithPrincipal(r.Context(), p))
	}
	if role != security.RoleAdmin {
		return w, r, func() {}, true
	}
	start := time.Now()
	sw := &security.StatusWriter{ResponseWriter: w}
	return sw, r, func() { s.cfg.Audit.Admin(r, p, sw.Status(), time.Since(start)) }, true
}

// Guard returns next behind security.Check for role (on no datastore), for handlers outside
// the Server (the metrics route, the admin listener): refusals are answered in the API's error
// envelope (writeRefusal) and audited, and the principal reaches next in the request's context
// (security.PrincipalFrom). With RoleAdmin every request that passes is audited too. A nil
// Authenticator returns next as it is (authentication off).
func Guard(a *security.Authenticator, audit *security.Auditor, role security.Role, next http.Handler) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ref := security.Check(a, r, role, "")
		if ref != nil {
			audit.Refused(r, p, ref.Status, ref.Message)
			writeRefusal(w, ref)
			return
		}
		r = r.WithContext(security.WithPrincipal(r.Context(), p))
		if role != security.RoleAdmin {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &security.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		audit.Admin(r, p, sw.Status(), time.Since(start))
	})
}

// writeRefusal answers a refused credential check (401 or 403) in the API's error envelope; a
// 401 carries WWW-Authenticate.
func writeRefusal(w http.ResponseWriter, ref *security.Refusal) {
	if ref.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="schemaless"`)
	}
	writeError(w, &httpError{status: ref.Status, code: ref.Code, msg: ref.Message})
}
