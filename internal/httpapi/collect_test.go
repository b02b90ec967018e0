package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Collect refreshes Redis-backed gauges before /metrics is served, but at
// most once per CollectEvery however many scrapers (status page tabs) poll.
func TestCollectRunsBeforeMetricsAtMostOncePerInterval(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_collected"})
	reg.MustRegister(g)
	calls := 0
	s, err := New(Config{Addr: "127.0.0.1:0"}, Options{
		Registry: reg,
		Ready:    func(context.Context) error { return nil },
		Status:   func(context.Context) (any, error) { return nil, nil },
		Collect: func(ctx context.Context) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("Collect got a context without a deadline")
			}
			calls++
			g.Set(float64(calls))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.ln.Close() })
	h := s.Handler()
	scrape := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); calls != 1 || !strings.Contains(body, "test_collected 1") {
		t.Fatalf("first scrape: %d collect calls, body:\n%s", calls, body)
	}
	scrape()
	scrape()
	if calls != 1 {
		t.Errorf("%d collect calls for 3 scrapes within %s, want 1", calls, CollectEvery)
	}
	// Other endpoints never trigger it.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if calls != 1 {
		t.Errorf("/healthz triggered Collect")
	}
}
