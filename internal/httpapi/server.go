// Package httpapi serves flatline's admin HTTP endpoints: / (the status
// page), /metrics (Prometheus), /healthz (the process runs), /readyz (Redis
// and Kafka reachable, layout loaded), /status (JSON, the shards status
// document) and /devices/down (JSON, the devices timed out now).
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
)

// Options wire the server.
type Options struct {
	Registry *prometheus.Registry
	// Ready returns nil when the instance can serve (checked per request).
	Ready func(ctx context.Context) error
	// Status returns the /status document.
	Status func(ctx context.Context) (any, error)
	Log    *slog.Logger
	// DevicesDown returns the /devices/down document: the devices timed
	// out now, of class (all when ""), at most limit of them (all when 0).
	// Nil serves 404.
	DevicesDown func(ctx context.Context, class string, limit int) (any, error)
	// Extra handlers mounted beside the built-in ones (e.g. the status page).
	Extra map[string]http.Handler
}

// DevicesDownLimit is the default of /devices/down?limit=, as of `flatline
// devices down --limit`.
const DevicesDownLimit = 1000

// Server is the admin HTTP server.
type Server struct {
	cfg  Config
	opts Options
	ln   net.Listener
}

// New binds the listener at once so a bad address fails at start.
func New(cfg Config, opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http.addr %s: %w", cfg.Addr, err)
	}
	return &Server{cfg: cfg, opts: opts, ln: ln}, nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Handler returns the mux.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/{$}", Page())
	// Gauges read from Redis are a collector of the registry: read when
	// gathered, absent when the read fails.
	mux.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.opts.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
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
	return mux
}

// devicesDown serves GET /devices/down?class=C&limit=N with the query
// options of `flatline devices down`: a bad option is a 400 naming it.
func (s *Server) devicesDown(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		if name != "class" && name != "limit" {
			http.Error(w, fmt.Sprintf("unknown query parameter %q (want class, limit)", name), http.StatusBadRequest)
			return
		}
	}
	limit := DevicesDownLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("limit: want a whole number, 0 for all, got %q", v), http.StatusBadRequest)
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	list, err := s.opts.DevicesDown(ctx, q.Get("class"), limit)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
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

// Run serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	}
}
