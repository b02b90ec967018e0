package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func testServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Config{Addr: "127.0.0.1:0"}, Options{
		Registry: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return nil },
		Status:   func(context.Context) (any, error) { return map[string]any{"tracked": 1}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.ln.Close() })
	return s
}

func TestNewBindsPortZeroAndReportsIt(t *testing.T) {
	s := testServer(t)
	_, port, err := net.SplitHostPort(s.Addr())
	if err != nil || port == "0" || port == "" {
		t.Fatalf("Addr() = %q, want the bound port", s.Addr())
	}
}

func TestStatusPageIsServedAtRootOnly(t *testing.T) {
	h := testServer(t).Handler()
	get := func(method, path string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Result()
	}

	res := get(http.MethodGet, "/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q, want a default-src 'none' policy", csp)
	}
	for _, id := range []string{`id="shard-count"`, `id="tracked"`, `id="down"`, `id="chart-shards"`, `id="chart-resets"`, `id="chart-timeouts"`, `id="lateness-p99"`, `id="wm-lag"`, `id="owners"`, `id="r-mode"`, `id="r-policy"`, `id="r-persistence"`, `id="r-replicas"`} {
		if !strings.Contains(string(body), id) {
			t.Errorf("page lacks %s", id)
		}
	}

	if got := get(http.MethodHead, "/"); got.StatusCode != http.StatusOK {
		t.Errorf("HEAD / = %d", got.StatusCode)
	}
	if got := get(http.MethodPost, "/"); got.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %d, want 405", got.StatusCode)
	}
	if got := get(http.MethodGet, "/nope"); got.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404 (the page must not swallow unknown paths)", got.StatusCode)
	}
	if got := get(http.MethodGet, "/status"); got.StatusCode != http.StatusOK {
		t.Errorf("GET /status = %d", got.StatusCode)
	}
}

// The page must be self-contained: no scripts, styles, fonts or images from
// anywhere, and its data fetched by relative URL (so it works behind a
// reverse proxy under a path prefix).
func TestStatusPageIsSelfContained(t *testing.T) {
	html := string(page)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<(script|link|img|iframe)[^>]+(src|href)\s*=\s*"(https?:)?//`),
		regexp.MustCompile(`(?i)@import|url\(\s*["']?(https?:)?//`),
		regexp.MustCompile(`fetch(Text)?\("/`),
	} {
		if m := re.FindString(html); m != "" {
			t.Errorf("page is not self-contained: %q", m)
		}
	}
	// The only absolute URL allowed is the SVG namespace.
	for _, u := range regexp.MustCompile(`https?://[^\s"'<>)]+`).FindAllString(html, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("page references %s", u)
		}
	}
}
