// Package httpapi serves flatline's admin HTTP endpoints: / (the status
// page), /metrics (Prometheus), /healthz (the process runs), /readyz (Redis
// and Kafka reachable, layout loaded) and /status (JSON, the shards status
// document).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
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
	// Extra handlers mounted beside the built-in ones (e.g. the status page).
	Extra map[string]http.Handler
	// Collect, when set, refreshes gauges read from shared state (Redis)
	// before /metrics is served: at most once per CollectEvery, one call at
	// a time, bounded by the request's context.
	Collect func(ctx context.Context)
}

// CollectEvery bounds how often a scrape of /metrics triggers
// Options.Collect (the status page scrapes every 2 s per open tab).
const CollectEvery = time.Second

// Server is the admin HTTP server.
type Server struct {
	cfg  Config
	opts Options
	ln   net.Listener

	collectMu   sync.Mutex
	lastCollect time.Time
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
	metrics := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		s.collect(r.Context())
		metrics.ServeHTTP(w, r)
	})
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
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
	for path, h := range s.opts.Extra {
		mux.Handle(path, h)
	}
	return mux
}

// collect runs Options.Collect unless it ran within CollectEvery.
func (s *Server) collect(ctx context.Context) {
	if s.opts.Collect == nil {
		return
	}
	s.collectMu.Lock()
	defer s.collectMu.Unlock()
	if time.Since(s.lastCollect) < CollectEvery {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s.opts.Collect(ctx)
	s.lastCollect = time.Now()
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
