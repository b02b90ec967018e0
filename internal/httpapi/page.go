package httpapi

import (
	_ "embed"
	"net/http"
)

// page is the status page: one self-contained HTML document (inline CSS,
// vanilla JS, inline SVG charts, no external assets and no build step) that
// polls /status and /metrics and derives rates and lateness quantiles from
// counter and histogram-bucket deltas in the browser.
//
//go:embed page.html
var page []byte

// Page serves the status page. Mounted at the root of the admin address;
// it fetches its data by relative URL, so it also works behind a reverse
// proxy that serves the admin endpoints under a path prefix.
func Page() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Everything is inline and data comes from this origin: the policy
		// keeps it that way (an external asset would fail loudly).
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "+
			"img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(page)
	})
}
