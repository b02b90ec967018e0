package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// GET /devices/down takes the options of `flatline devices down`: class,
// and limit with the same default; a bad one is a 400 naming it, and the
// read is never asked.
func TestDevicesDownTakesTheOptionsOfTheCommand(t *testing.T) {
	t.Parallel()
	type call struct {
		class string
		limit int
	}
	var calls []call
	s, err := New(Config{Addr: "127.0.0.1:0"}, Options{
		Registry: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return nil },
		Status:   func(context.Context) (any, error) { return nil, nil },
		DevicesDown: func(ctx context.Context, class string, limit int) (any, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("DevicesDown got a context without a deadline")
			}
			calls = append(calls, call{class, limit})
			return map[string]any{"devices": []string{}, "truncated": false}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := s.Handler()
	for _, tc := range []struct {
		method, url string
		code        int
		want        *call
		body        string
	}{
		{"GET", "/devices/down", 200, &call{"", DevicesDownLimit}, `"devices": []`},
		{"GET", "/devices/down?class=camera&limit=20", 200, &call{"camera", 20}, ""},
		{"GET", "/devices/down?limit=0", 200, &call{"", 0}, ""},
		{"GET", "/devices/down?limit=-1", 400, nil, `limit: want a whole number`},
		{"GET", "/devices/down?limit=ten", 400, nil, `limit: want a whole number`},
		{"GET", "/devices/down?clas=camera", 400, nil, `unknown query parameter "clas"`},
		{"POST", "/devices/down", 405, nil, ""},
	} {
		calls = nil
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.url, nil))
		if rec.Code != tc.code {
			t.Errorf("%s %s = %d, want %d: %s", tc.method, tc.url, rec.Code, tc.code, rec.Body)
			continue
		}
		if !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: body %q lacks %q", tc.method, tc.url, rec.Body, tc.body)
		}
		switch {
		case tc.want == nil && len(calls) > 0:
			t.Errorf("%s %s read the devices: %v", tc.method, tc.url, calls)
		case tc.want != nil && (len(calls) != 1 || calls[0] != *tc.want):
			t.Errorf("%s %s read %v, want %v", tc.method, tc.url, calls, *tc.want)
		}
		if tc.code == 200 && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.url, rec.Header().Get("Content-Type"))
		}
	}
}
