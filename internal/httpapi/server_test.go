package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// newServer is a server on a free loopback port whose every endpoint
// answers; devicesDown fails the test when expose says it must not be
// asked.
func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := New(cfg, Options{
		Registry: prometheus.NewRegistry(),
		Ready:    func(context.Context) error { return nil },
		Status:   func(context.Context) (any, error) { return map[string]any{"device": "dev-1"}, nil },
		DevicesDown: func(context.Context, DevicesDownQuery) (any, error) {
			if cfg.Expose == ExposeMetrics {
				t.Error("with http.expose metrics, /devices/down read the devices")
			}
			return map[string]any{"devices": []string{"dev-1"}}, nil
		},
		Extra: map[string]http.Handler{"/extra": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("dev-1\n"))
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serve runs s until the test ends, and waits for Run to return then.
func serve(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// closedByServer reads from conn until the server closes it, and fails the
// test when the read ends any other way. The deadline is a safety net for a
// server that would keep the connection forever, not a measure.
func closedByServer(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open", what)
	}
	// io.Copy returns nil at EOF; a reset is a close too.
}

// only is timeouts of an hour but for the one short that set makes, so a
// connection closed is closed by that one (net/http falls back from one
// timeout to another when one is unset).
func only(set func(*timeouts)) timeouts {
	to := timeouts{readHeader: time.Hour, read: time.Hour, write: time.Hour, idle: time.Hour}
	set(&to)
	return to
}

// sendTo starts a server whose timeouts are only(set), dials it and writes
// request, returning the connection (closed at the end of the test).
func sendTo(t *testing.T, set func(*timeouts), request string) net.Conn {
	t.Helper()
	s := newServer(t, Config{})
	s.timeouts = only(set)
	serve(t, s)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Every connection has a deadline for its headers, its request, its
// response and its idleness, and headers are bounded: what a client holds
// of the server it gives back.
func TestEveryConnectionHasTimeouts(t *testing.T) {
	t.Parallel()
	srv := newServer(t, Config{}).httpServer()
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("header %s, read %s, write %s, idle %s, max header bytes %d: want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	// The write deadline runs from the end of the request's headers: the
	// slowest answer must fit in it, or its client gets a cut response.
	if srv.WriteTimeout <= devicesDownTimeout {
		t.Errorf("write timeout %s leaves no room for a /devices/down page read for up to %s", srv.WriteTimeout, devicesDownTimeout)
	}
}

// A client that trickles its headers is cut off at ReadHeaderTimeout.
func TestSlowHeadersAreCutOff(t *testing.T) {
	t.Parallel()
	conn := sendTo(t, func(to *timeouts) { to.readHeader = 50 * time.Millisecond },
		"GET /healthz HTTP/1.1\r\nHost: flatline\r\nX-Slow: ")
	closedByServer(t, conn, "headers never finished")
}

// A client that never sends the body it announced is cut off at
// ReadTimeout, though its headers came in time.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	conn := sendTo(t, func(to *timeouts) { to.read = 50 * time.Millisecond },
		"GET /healthz HTTP/1.1\r\nHost: flatline\r\nContent-Length: 100\r\n\r\nx")
	closedByServer(t, conn, "body never finished")
}

// A kept-alive connection that sends no next request is closed at
// IdleTimeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	conn := sendTo(t, func(to *timeouts) { to.idle = 50 * time.Millisecond },
		"GET /healthz HTTP/1.1\r\nHost: flatline\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("GET /healthz = %d, close %v; want 200 on a kept-alive connection", res.StatusCode, res.Close)
	}
	closedByServer(t, conn, "idle after a request")
}

// Only GET and HEAD are answered, on every path: anything else is a 405
// that names them in Allow; HEAD answers as GET does, without a body.
func TestOnlyGetAndHeadAreAnswered(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	serve(t, s)
	base := "http://" + s.Addr()
	for _, path := range []string{"/", "/metrics", "/healthz", "/readyz", "/status", "/devices/down", "/extra", "/nope"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "PROPFIND"} {
			req, err := http.NewRequest(method, base+path, strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d, Allow %q; want 405, GET, HEAD", method, path, res.StatusCode, res.Header.Get("Allow"))
			}
		}
		want := http.StatusOK
		if path == "/nope" {
			want = http.StatusNotFound
		}
		res, err := http.Head(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != want || len(body) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes of body, want %d and none", path, res.StatusCode, len(body), want)
		}
		res, err = http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, res.StatusCode, want)
		}
	}
}

// With http.expose metrics, only /metrics, /healthz and /readyz are
// served: every endpoint that names a device is a 404, and is not asked.
func TestExposeMetricsServesNoDeviceID(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{Expose: ExposeMetrics})
	serve(t, s)
	for path, want := range map[string]int{
		"/metrics": 200, "/healthz": 200, "/readyz": 200,
		"/": 404, "/status": 404, "/devices/down": 404, "/devices/down?limit=1": 404, "/extra": 404,
	} {
		res, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, res.StatusCode, want)
		}
		if strings.Contains(string(body), "dev-1") {
			t.Errorf("GET %s shows a device id: %s", path, body)
		}
	}
}

// A bad http section is refused naming the key, in one line.
func TestValidateNamesTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		web  string // the web config file's content, when there is one
		want string // "" = valid
	}{
		{"default", DefaultConfig(), "", ""},
		{"metrics only", Config{Addr: ":9464", Expose: ExposeMetrics}, "", ""},
		{"unknown expose", Config{Addr: ":9464", Expose: "devices"}, "", `http.expose: want all or metrics, got "devices"`},
		{"empty expose", Config{Addr: ":9464"}, "", `http.expose: want all or metrics, got ""`},
		{"bad addr", Config{Addr: "9464", Expose: ExposeAll}, "", "http.addr:"},
		{"missing web config", Config{Addr: ":9464", Expose: ExposeAll, WebConfigFile: dir + "/missing.yml"}, "", "http.web_config_file: " + dir + "/missing.yml: open"},
		{"unknown web config key", Config{Addr: ":9464", Expose: ExposeAll}, "tls_server_config:\n  cert_fle: x\n", "http.web_config_file: "},
		{"bad bcrypt hash", Config{Addr: ":9464", Expose: ExposeAll}, "basic_auth_users:\n  admin: secret\n", "http.web_config_file: "},
		{"missing certificate", Config{Addr: ":9464", Expose: ExposeAll}, "tls_server_config:\n  cert_file: nope.pem\n  key_file: nope-key.pem\n", "http.web_config_file: "},
		{"basic auth only", Config{Addr: ":9464", Expose: ExposeAll}, "basic_auth_users:\n  admin: $2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.web != "" {
				cfg.WebConfigFile = testenv.File(t, "web.yml", tc.web)
			}
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want %q", tc.want)
			case tc.want != "" && (!strings.HasPrefix(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\r\n")):
				t.Fatalf("error %q; want one line starting %q", err, tc.want)
			}
		})
	}
}

// The readiness checks run under a deadline of ReadyTimeout, so a check
// that gets no answer (Redis behind a network that drops packets) is cut
// off by it, and its error is the 503's body: a probe never hangs.
func TestReadyzChecksRunUnderItsDeadline(t *testing.T) {
	t.Parallel()
	left := make(chan time.Duration, 1)
	s, err := New(Config{Addr: "127.0.0.1:0"}, Options{
		Registry: prometheus.NewRegistry(),
		Ready: func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if !ok {
				left <- 0
				return errors.New("no deadline")
			}
			left <- time.Until(d)
			return errors.New("redis: no answer within 500ms")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	serve(t, s)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + s.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "redis: no answer") {
		t.Errorf("/readyz: %d %q, want 503 with the check's error", resp.StatusCode, body)
	}
	if d := <-left; d <= 0 || d > ReadyTimeout {
		t.Errorf("the checks ran with %v left before their deadline, want at most %v", d, ReadyTimeout)
	}
}
