// Package schemareg is a schema registry inside the process, for `flatline
// dev --shape avro` and the tests: franz-go's srfake (a Confluent-compatible
// registry in memory: POST /subjects/{subject}/versions, GET
// /schemas/ids/{id}, GET /subjects and the rest of the API) served over
// real HTTP on a port of its own, with optional basic auth and TLS, a
// count of the requests it was sent, and a way to become unreachable and
// come back on the same address (Stop, Restart).
//
// Like srfake, it checks that a schema is JSON, not that it is valid Avro:
// a test can register a schema that no decoder parses.
package schemareg

import (
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Server is a running registry. Its schemas outlive Stop and Restart.
type Server struct {
	registry *srfake.Registry
	handler  http.Handler
	tls      *tls.Config
	user     string
	pass     string
	requests atomic.Int64

	mu     sync.Mutex
	addr   string // the address first bound, which Restart binds again
	srv    *http.Server
	served chan struct{} // closed when srv's Serve returned
	closed bool
}

// Option configures a Server.
type Option func(*Server)

// WithBasicAuth makes every request present user and pass with HTTP basic
// auth; others are answered 401, as Confluent's registry does.
func WithBasicAuth(user, pass string) Option {
	return func(s *Server) { s.user, s.pass = user, pass }
}

// WithTLS serves HTTPS with cfg (which holds the server certificate).
func WithTLS(cfg *tls.Config) Option {
	return func(s *Server) { s.tls = cfg }
}

// Start serves a new, empty registry on addr (host:port; port 0 picks a
// free one).
func Start(addr string, opts ...Option) (*Server, error) {
	s := &Server{registry: srfake.NewRegistry()}
	for _, o := range opts {
		o(s)
	}
	s.handler = s.count(s.authenticate(s.registry.Handler()))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("schema registry: listen on %s: %w", addr, err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// URL is the registry's base URL, http:// or https://.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// Register adds schema (Avro, naming the types of refs) under subject, as
// a producer's POST /subjects/{subject}/versions does, and returns its id:
// the same schema gets the same id again.
func (s *Server) Register(subject, schema string, refs ...sr.SchemaReference) (int, error) {
	id, _, err := s.registry.RegisterSchema(subject, sr.Schema{Schema: schema, Type: sr.TypeAvro, References: refs})
	if err != nil {
		return 0, fmt.Errorf("schema registry: register under %s: %w", subject, err)
	}
	return id, nil
}

// Requests is how many HTTP requests the registry has been sent, answered
// or refused.
func (s *Server) Requests() int64 {
	return s.requests.Load()
}

// Stop makes the registry unreachable: it closes the listener and every
// connection, so that requests are refused until Restart. Stopping a
// stopped registry does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Restart serves the registry again on the address it first bound.
// Restarting a running registry does nothing.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("schema registry: restart after Close")
	}
	if s.srv != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("schema registry: listen again on %s: %w", s.addr, err)
	}
	s.serveLocked(ln)
	return nil
}

// Close stops the registry for good.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	s.closed = true
}

func (s *Server) serve(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serveLocked(ln)
}

func (s *Server) serveLocked(ln net.Listener) {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	srv := &http.Server{
		Handler: s.handler,
		// A client that fails its handshake (a test's wrong CA) is the
		// client's error to report, not the registry's to log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		// Serve returns when Stop closes it: http.ErrServerClosed.
		_ = srv.Serve(ln)
	}()
	s.srv, s.served = srv, served
}

func (s *Server) stopLocked() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Close() // closes the listener and every connection
	<-s.served
	s.srv, s.served = nil, nil
}

// count counts every request.
func (s *Server) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		next.ServeHTTP(w, r)
	})
}

// authenticate refuses a request without the credentials of
// WithBasicAuth, as Confluent's registry does: 401 and its JSON error.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.user == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(s.pass)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="schema-registry"`)
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error_code":401,"message":"Unauthorized"}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}
