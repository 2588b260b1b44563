package api

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// checkRequest refuses, before routing, what the API cannot serve as it was sent: on every path,
// a "." or ".." segment, as sent or percent-encoded ("%2e%2E"), and an empty segment ("//")
// but a trailing slash (http.ServeMux would answer them with a redirect to a cleaned path,
// which turns GET /../../etc/passwd into a redirect to /etc/passwd and
// PUT /v1/trips/../trips/cells/... into a write); under /v1/, a trailing slash and invalid
// UTF-8 in the path too; a query with invalid UTF-8 in a name or value, and, under /v1/, a
// query parameter no route reads (queryParams). It returns the 400 naming the field, or nil.
func checkRequest(r *http.Request) *httpError {
	p := r.URL.Path
	v1 := strings.HasPrefix(p, "/v1/")
	if v1 && !utf8.ValidString(p) {
		return invalid("path", "is not valid UTF-8")
	}
	if he := checkSegments(p, v1, false); he != nil {
		return he
	}
	if ep := r.URL.EscapedPath(); ep != p {
		if he := checkSegments(ep, v1, true); he != nil {
			return he
		}
	}
	for name, vs := range r.URL.Query() {
		if !utf8.ValidString(name) {
			return invalid("query", "a parameter name is not valid UTF-8")
		}
		if v1 && !queryParams[name] {
			return invalid(name, "is not a parameter of the API (a typo? see docs/api.md)")
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return invalid(name, "is not valid UTF-8")
			}
		}
	}
	return nil
}

// checkSegments refuses a path with an empty segment but a trailing slash, with a trailing
// slash too when v1, or with a "." or ".." segment: the 400 naming path, or nil. p is the
// decoded path, or with escaped the path as sent, whose segments are unescaped one by one.
func checkSegments(p string, v1, escaped bool) *httpError {
	if p == "" || p == "*" { // CONNECT, OPTIONS *
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if v1 {
		segs = segs[1:] // "v1"
	}
	for i, seg := range segs {
		if escaped && strings.Contains(seg, "%") {
			if u, err := url.PathUnescape(seg); err == nil {
				seg = u
			}
		}
		switch {
		case seg == "" && i == len(segs)-1 && (i > 0 || !v1):
			if v1 {
				return invalid("path", "%q ends with a slash", p)
			}
		case seg == "":
			return invalid("path", "%q has an empty segment (a missing key?)", p)
		case seg == "." || seg == "..":
			return invalid("path", "%q has a %q segment", p, seg)
		}
	}
	return nil
}

// queryParams are the query parameters some /v1/ route reads. Any other is refused (400 naming
// it): a client that pages a shard log with ?after=N instead of ?location=N must not silently
// read from 0. A parameter of another route is not refused; the route ignores it.
var queryParams = map[string]bool{
	"consistency": true, "max_staleness": true, "if_latest_ref_key": true, "from_ref_key": true, "limit": true, "order": true,
	"location": true, "location_type": true, "column_key": true, "wait": true, "body_encoding": true,
	"near": true, "count": true, "dry_run": true, "partition": true, "datastore": true, "force": true,
	"accept_lost_cells": true, "confirm": true, "origin": true,
}

// checkUTF8 returns a 400 naming field when b is not valid UTF-8 (JSON text must be: RFC 8259
// §8.1), with the offset of the first invalid byte; nil otherwise.
func checkUTF8(field string, b []byte) *httpError {
	if utf8.Valid(b) {
		return nil
	}
	off := 0
	for off < len(b) {
		r, size := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	return invalid(field, "is not valid UTF-8 (byte %d of %d)", off, len(b))
}

// tooLargeDeclared answers a request whose Content-Length is over limit at once, before
// reading the body: with "Expect: 100-continue" the client then never sends it (net/http sends
// "100 Continue" only when the handler reads the body).
func tooLargeDeclared(r *http.Request, limit int64, field string) *httpError {
	if r.ContentLength > limit {
		return tooLarge(field, "Content-Length %d is larger than %d bytes", r.ContentLength, limit)
	}
	return nil
}
