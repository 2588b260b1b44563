package api

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
)

// The operator console: one self-contained HTML page (inline CSS and vanilla JavaScript, no
// external resources) that every node serves at /console. The page reads the node's own JSON
// API from the browser every 2s — GET /v1/cluster, /v1/admin/nodes, /v1/admin/partitions,
// /v1/admin/datastores (with a fallback to /v1/cluster while those answer 404), and per
// datastore /v1/{ds}/indexes, /v1/{ds}/groups and /v1/{ds}/groups/{group} with
// consistency=stale — and renders nodes, partitions with leaders and replica lag, the catalog's
// datastores with their partitions and splits, indexes and consumer groups. A failed
// fetch is shown in an error banner over the last data that loaded; the page is never blank.
// The server does no work for the page beyond sending it: it adds no endpoint of its own.

//go:embed console.html
var consolePage []byte

// consoleCSP is the page's Content-Security-Policy: nothing may load but the page's own inline
// style and script (allowed by their SHA-256) and fetches to the node itself.
var consoleCSP = "default-src 'none'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"style-src " + inlineHashes("style") + "; script-src " + inlineHashes("script")

// inlineHashes returns the CSP source list ('sha256-…' …) of every inline <tag> element of
// the console page. It panics (at init) when the page has none: the page would not work.
func inlineHashes(tag string) string {
	re := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`)
	out := ""
	for _, m := range re.FindAllSubmatch(consolePage, -1) {
		sum := sha256.Sum256(m[1])
		if out != "" {
			out += " "
		}
		out += "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	if out == "" {
		panic("api: console.html has no inline <" + tag + ">")
	}
	return out
}

// consoleRoutes registers the operator console: GET (and HEAD) /console and /console/.
// Other paths under /console/ fall through to the API's 404.
func (s *Server) consoleRoutes() {
	s.mux.HandleFunc("GET /console", serveConsole)
	s.mux.HandleFunc("GET /console/{$}", serveConsole)
}

// serveConsole sends the console page. It is never cached, so that a node upgrade shows the
// page of the new version at the next reload.
func serveConsole(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", consoleCSP)
	_, _ = w.Write(consolePage)
}
