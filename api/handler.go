package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/wire"
)

// handler serves one method of a route. It writes a successful answer itself and returns nil,
// or returns the error to answer without having written anything: the route's adapter
// (routeTimeout) writes it with Server.fail. An *httpError is answered as it is; any other
// error as backendError maps it.
type handler func(w http.ResponseWriter, r *http.Request) error

// handlers maps the methods of one route to their handlers.
type handlers map[string]handler

// with adds h for method when ok (the server has the part of the node h needs) and returns hs.
func (hs handlers) with(ok bool, method string, h handler) handlers {
	if ok {
		hs[method] = h
	}
	return hs
}

// route is a path served for some methods; other methods answer 405 in the API's error shape.
func (s *Server) route(pattern string, hs handlers) {
	s.routeTimeout(pattern, s.cfg.RequestTimeout, hs)
}

// routeTimeout is route with its own bound on a request's handling. It registers nothing when
// hs is empty (the path then answers 404, as an unknown one). Each request runs its method's
// handler with a context bounded by timeout, and an error the handler returns is answered by
// fail; HEAD is served by GET's handler.
func (s *Server) routeTimeout(pattern string, timeout time.Duration, hs handlers) {
	if len(hs) == 0 {
		return
	}
	s.mux.HandleFunc(pattern, s.metrics.instrument(routeOperations(pattern, hs), func(w http.ResponseWriter, r *http.Request) {
		h, ok := hs[r.Method]
		if !ok && r.Method == http.MethodHead {
			h, ok = hs[http.MethodGet]
		}
		if !ok {
			methods := make([]string, 0, len(hs))
			for m := range hs {
				methods = append(methods, m)
			}
			sort.Strings(methods)
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, methodNotAllowed(r))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	}))
}

// stream registers a route served for method only (not even HEAD: a backup's body is the
// work), without a bound on its handling: the client's connection bounds it. Other methods
// answer 405 in the API's error shape; an error h returns is answered by fail.
func (s *Server) stream(pattern, method string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, methodNotAllowed(r))
			return
		}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

func methodNotAllowed(r *http.Request) *httpError {
	return &httpError{status: http.StatusMethodNotAllowed, code: wire.CodeMethod, msg: fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)}
}

// fail answers err: an *httpError as it is, any other error as backendError maps it (404 for
// an unknown datastore, 503 with Retry-After for an unavailable node, 504 for an
// indeterminate write, 500 for the rest). A 500 is logged with the request; 501, 503 and 504
// are answers, not failures of the node, and are not.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := backendError(err)
	switch e.status {
	case http.StatusNotImplemented, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		if e.status >= 500 {
			s.cfg.Logger.Error("api: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		}
	}
	writeError(w, e)
}

// unimplemented returns hs with every handler replaced by one answering 501 with code and
// msg: the routes of a part of the node the server does not have keep their methods (405 for
// the others) and their metrics names.
func unimplemented(hs handlers, code, msg string) handlers {
	out := make(handlers, len(hs))
	for m := range hs {
		out[m] = func(http.ResponseWriter, *http.Request) error {
			return &httpError{status: http.StatusNotImplemented, code: code, msg: msg}
		}
	}
	return out
}
