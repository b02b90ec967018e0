// Package httpapi serves flatline's admin HTTP endpoints: / (the status
// page), /metrics (Prometheus), /healthz (the process runs), /readyz (Redis
// and Kafka reachable, layout loaded), /status (JSON, the shards status
// document) and /devices/down (JSON, the devices timed out now, a page at a
// time).
//
// It runs for months, probed and scraped all the while, so nothing a
// client does may hold resources for long: every connection has timeouts
// for its headers, its request, its response and its idleness; only GET
// and HEAD are answered; a page of /devices/down is bounded. The
// exporter-toolkit web config adds TLS and basic auth in front of every
// endpoint, and http.expose metrics keeps every device id inside the
// process.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
)

// Options wire the server.
type Options struct {
	Registry *prometheus.Registry
	// Ready returns nil when the instance can serve (checked per request).
	Ready func(ctx context.Context) error
	// Status returns the /status document.
	Status func(ctx context.Context) (any, error)
	Log    *slog.Logger
	// DevicesDown returns a page of the /devices/down document: the
	// devices timed out now, as q asks. An error with a BadRequest method
	// that says true (a cursor it did not give) is answered 400, any other
	// 503. Nil serves 404.
	DevicesDown func(ctx context.Context, q DevicesDownQuery) (any, error)
	// Extra handlers mounted beside the built-in ones, with http.expose all
	// only.
	Extra map[string]http.Handler
}

// DevicesDownQuery is what GET /devices/down asks for.
type DevicesDownQuery struct {
	// Class keeps the devices of this class; "" keeps all.
	Class string
	// Parent keeps the children of this device; "" keeps all.
	Parent string
	// Limit is the most devices of the page: 1 to DevicesDownMaxLimit.
	Limit int
	// Cursor is the next of the previous page; "" for the first.
	Cursor string
}

// DevicesDownLimit is the default of /devices/down?limit=, as of `flatline
// devices down --limit`.
const DevicesDownLimit = 1000

// DevicesDownMaxLimit is the largest /devices/down?limit=: what one request
// holds in memory is bounded by it, however many devices are down; the
// next cursor pages through the rest.
const DevicesDownMaxLimit = 10_000

// badRequest is an error of the caller's making that a read reports.
type badRequest interface {
	error
	BadRequest() bool
}

// timeouts bound how long a connection may hold the server's resources.
type timeouts struct {
	// readHeader is for the request line and headers: a client that
	// trickles them (slowloris) is cut off after it.
	readHeader time.Duration
	// read is for the whole request; the endpoints take no body.
	read time.Duration
	// write is from the end of the request's headers to the end of the
	// response: longer than the slowest answer, a /devices/down page of
	// DevicesDownMaxLimit (its read may take devicesDownTimeout) or a
	// scrape of /metrics that reads gauges from Redis.
	write time.Duration
	// idle is how long a kept-alive connection may wait for its next
	// request: longer than a usual scrape interval, so a scraper keeps
	// one connection rather than dialing each time.
	idle time.Duration
}

// ReadyTimeout bounds the checks of one /readyz: past it the answer is 503
// naming what did not answer in time. A platform's probe (a kubelet's
// timeoutSeconds, 1 s by default) then always gets an answer: an instance
// whose network to Redis drops packets is reported unready, never a probe
// that hangs.
const ReadyTimeout = 500 * time.Millisecond

// devicesDownTimeout bounds the Redis reads of one /devices/down page.
const devicesDownTimeout = 30 * time.Second

var defaultTimeouts = timeouts{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      devicesDownTimeout + 15*time.Second,
	idle:       2 * time.Minute,
}

// maxHeaderBytes bounds a request's headers (Go's default is 1 MiB): a
// GET with a basic-auth header needs a few hundred bytes.
const maxHeaderBytes = 64 << 10

// Server is the admin HTTP server.
type Server struct {
	cfg      Config
	opts     Options
	ln       net.Listener
	timeouts timeouts
}

// New binds the listener at once so a bad address fails at start.
func New(cfg Config, opts Options) (*Server, error) {
	if cfg.Expose == "" {
		cfg.Expose = ExposeAll
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http.addr %s: %w", cfg.Addr, err)
	}
	return &Server{cfg: cfg, opts: opts, ln: ln, timeouts: defaultTimeouts}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Handler returns the endpoints http.expose names, behind the method
// check: only GET and HEAD are answered.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// Gauges read from Redis are a collector of the registry: read when
	// gathered, absent when the read fails.
	mux.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	if s.cfg.Expose == ExposeMetrics {
		// The rest names devices (or, the page, shows them): left out, it
		// is a 404 like any unknown path.
		return getOnly(mux)
	}
	mux.Handle("/{$}", Page())
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		st, err := s.opts.Status(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, st)
	})
	if s.opts.DevicesDown != nil {
		mux.HandleFunc("GET /devices/down", s.devicesDown)
	}
	for path, h := range s.opts.Extra {
		mux.Handle(path, h)
	}
	return getOnly(mux)
}

// getOnly answers 405 to every method but GET and HEAD: no endpoint
// changes anything, and a request with a body is one that none reads.
func getOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: only GET and HEAD are answered", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// devicesDown serves GET /devices/down?class=C&limit=N&cursor=X with the
// query options of `flatline devices down`: a bad option is a 400 naming
// it.
func (s *Server) devicesDown(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		if name != "class" && name != "parent" && name != "limit" && name != "cursor" {
			http.Error(w, fmt.Sprintf("unknown query parameter %q (want class, parent, limit, cursor)", name), http.StatusBadRequest)
			return
		}
	}
	dq := DevicesDownQuery{Class: q.Get("class"), Parent: q.Get("parent"), Limit: DevicesDownLimit, Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 1:
			http.Error(w, fmt.Sprintf("limit: want a whole number from 1 to %d, got %q", DevicesDownMaxLimit, v), http.StatusBadRequest)
			return
		case n > DevicesDownMaxLimit:
			http.Error(w, fmt.Sprintf("limit: at most %d a page, got %d; follow next for the rest", DevicesDownMaxLimit, n), http.StatusBadRequest)
			return
		}
		dq.Limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), devicesDownTimeout)
	defer cancel()
	list, err := s.opts.DevicesDown(ctx, dq)
	if err != nil {
		code := http.StatusServiceUnavailable
		if br, ok := errors.AsType[badRequest](err); ok && br.BadRequest() {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Close releases the listener New bound, for a server that never runs; after
// Run it has nothing left to do.
func (s *Server) Close() error {
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Run serves until ctx is cancelled: through the exporter-toolkit, which
// applies http.web_config_file (TLS, basic auth) to every request, or
// plain HTTP when it is empty.
func (s *Server) Run(ctx context.Context) error {
	srv := s.httpServer()
	file := s.cfg.WebConfigFile
	errc := make(chan error, 1)
	go func() { errc <- web.Serve(s.ln, srv, &web.FlagConfig{WebConfigFile: &file}, s.opts.Log) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}

// httpServer is the server Run serves with: the handler and, on every
// connection, the timeouts.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.timeouts.readHeader,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.timeouts.write,
		IdleTimeout:       s.timeouts.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.opts.Log.Handler(), slog.LevelDebug),
	}
}
