package httpapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// cursorError is an error of the caller's making, as a listing reports a
// cursor it did not give.
type cursorError struct{}

func (cursorError) Error() string    { return "cursor: not one a listing gave" }
func (cursorError) BadRequest() bool { return true }

// GET /devices/down takes the options of `flatline devices down` and a
// cursor: class, and limit with the same default, at most
// DevicesDownMaxLimit; a bad one is a 400 naming it (and the bound), and
// the read is never asked. A cursor the read refuses is a 400 too; any
// other failure of the read a 503.
func TestDevicesDownTakesTheOptionsOfTheCommand(t *testing.T) {
	t.Parallel()
	var calls []DevicesDownQuery
	s, err := New(Config{Addr: "127.0.0.1:0"}, Options{
		Registry: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return nil },
		Status:   func(context.Context) (any, error) { return nil, nil },
		DevicesDown: func(ctx context.Context, q DevicesDownQuery) (any, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("DevicesDown got a context without a deadline")
			}
			calls = append(calls, q)
			switch q.Cursor {
			case "refused":
				return nil, cursorError{}
			case "redis-down":
				return nil, errors.New("read down set of shard 3: connection refused")
			}
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
		want        *DevicesDownQuery
		body        string
	}{
		{"GET", "/devices/down", 200, &DevicesDownQuery{Limit: DevicesDownLimit}, `"devices": []`},
		{"GET", "/devices/down?class=camera&limit=20", 200, &DevicesDownQuery{Class: "camera", Limit: 20}, ""},
		{"GET", "/devices/down?limit=10000&cursor=abc", 200, &DevicesDownQuery{Limit: 10000, Cursor: "abc"}, ""},
		{"HEAD", "/devices/down", 200, &DevicesDownQuery{Limit: DevicesDownLimit}, ""},
		{"GET", "/devices/down?limit=10001", 400, nil, `limit: at most 10000 a page, got 10001; follow next for the rest`},
		{"GET", "/devices/down?limit=0", 400, nil, `limit: want a whole number from 1 to 10000`},
		{"GET", "/devices/down?limit=-1", 400, nil, `limit: want a whole number from 1 to 10000`},
		{"GET", "/devices/down?limit=ten", 400, nil, `limit: want a whole number`},
		{"GET", "/devices/down?clas=camera", 400, nil, `unknown query parameter "clas"`},
		{"GET", "/devices/down?cursor=refused", 400, &DevicesDownQuery{Limit: DevicesDownLimit, Cursor: "refused"}, "cursor: not one a listing gave"},
		{"GET", "/devices/down?cursor=redis-down", 503, &DevicesDownQuery{Limit: DevicesDownLimit, Cursor: "redis-down"}, "connection refused"},
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
