package avro

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// configKey is where the section sits in flatline's configuration; errors
// found after Validate (building the client) name it.
const configKey = "ingest.schema_registry"

// maxReferenceDepth bounds how deep schema references may nest, so that a
// registry serving a reference cycle cannot make a fetch loop.
const maxReferenceDepth = 16

// Registry fetches schemas by id from a Confluent-compatible schema
// registry, with franz-go's sr client over an HTTP client of its own, and
// remembers whether the registry answers (Healthy). It caches nothing: the
// Decoder does.
type Registry struct {
	client    *sr.Client
	transport *http.Transport

	mu      sync.Mutex
	failure error // the last outage while no request has succeeded since
}

// NewRegistry builds the client of cfg, which Validate has checked. It
// sends no request: an unreachable registry shows at the first schema
// fetched, as ErrUnavailable and in Healthy.
func NewRegistry(cfg Config) (*Registry, error) {
	urls, err := cfg.urls(configKey)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := cfg.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("%s.tls: %w", configKey, err)
	}
	password, err := cfg.password(configKey)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultConfig().Timeout
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	opts := []sr.ClientOpt{
		sr.URLs(urls...),
		sr.HTTPClient(&http.Client{Transport: transport, Timeout: timeout}),
		sr.UserAgent("flatline"),
	}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, password))
	}
	client, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", configKey, err)
	}
	return &Registry{client: client, transport: transport}, nil
}

// Close releases the registry's idle connections. A request under way
// finishes or times out on its own.
func (r *Registry) Close() {
	r.transport.CloseIdleConnections()
}

// Healthy is nil, or the last outage (an error matching ErrUnavailable)
// while no request has succeeded since: what /readyz reports. A registry
// not asked yet is healthy; so is one that answered 404.
func (r *Registry) Healthy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

// note records the outcome of one exchange with the registry for Healthy.
func (r *Registry) note(err error) {
	r.mu.Lock()
	r.failure = err
	r.mu.Unlock()
}

// schema fetches the schema of id and parses it, with the schemas it
// references. Errors match ErrUnknownSchema (the registry does not know
// id or a schema it references), ErrUnavailable (the registry did not
// answer) or ErrBadWire (the schema is not Avro or does not parse: no
// record written with it can be read).
func (r *Registry) schema(ctx context.Context, id int) (hamba.Schema, error) {
	s, err := r.client.SchemaByID(ctx, id)
	if err != nil {
		return nil, r.failed(fmt.Sprintf("schema %d", id), err)
	}
	r.note(nil)
	// A fresh cache per schema: hamba's package-level cache would let a
	// name one schema defines stand in for another schema's reference.
	names := &hamba.SchemaCache{}
	if err := r.references(ctx, id, s.References, names, 1); err != nil {
		return nil, err
	}
	return parse(id, s, names)
}

// references parses the schemas refs name into names, theirs first.
func (r *Registry) references(ctx context.Context, id int, refs []sr.SchemaReference, names *hamba.SchemaCache, depth int) error {
	if len(refs) > 0 && depth > maxReferenceDepth {
		return fmt.Errorf("%w: schema %d: references nest deeper than %d", ErrBadWire, id, maxReferenceDepth)
	}
	for _, ref := range refs {
		s, err := r.client.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return r.failed(fmt.Sprintf("schema %d: reference %s version %d", id, ref.Subject, ref.Version), err)
		}
		r.note(nil)
		if err := r.references(ctx, id, s.References, names, depth+1); err != nil {
			return err
		}
		if _, err := parse(id, s.Schema, names); err != nil {
			return err
		}
	}
	return nil
}

// parse parses s, the schema of id or one it references, into names.
func parse(id int, s sr.Schema, names *hamba.SchemaCache) (hamba.Schema, error) {
	if s.Type != sr.TypeAvro {
		return nil, fmt.Errorf("%w: schema %d is %s, not AVRO", ErrBadWire, id, s.Type)
	}
	parsed, err := hamba.ParseWithCache(s.Schema, "", names)
	if err != nil {
		return nil, fmt.Errorf("%w: schema %d: %w", ErrBadWire, id, err)
	}
	return parsed, nil
}

// failed classifies a failed request about what. No answer, a timeout,
// 5xx, 401/403 (credentials the registry refuses are an outage to fix, not
// bad records), 408 and 429 are an outage; any other answer (404, or
// another 4xx refusing the request for this id) says the schema is
// unknown.
func (r *Registry) failed(what string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		answer := fmt.Sprintf("%s %s: %d %s: %s", re.Method, re.URL, re.StatusCode, http.StatusText(re.StatusCode), clip(re.Error()))
		switch code := re.StatusCode; {
		case code >= 500 || code == http.StatusUnauthorized || code == http.StatusForbidden ||
			code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
			err = fmt.Errorf("%w: %s: %s", ErrUnavailable, what, answer)
			r.note(err)
			return err
		default:
			r.note(nil)
			return fmt.Errorf("%w: %s: %s", ErrUnknownSchema, what, answer)
		}
	}
	// sr wraps the *url.Error, which repeats the method and URL it names.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("%s %s: %w", ue.Op, ue.URL, ue.Err)
	}
	err = fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	r.note(err)
	return err
}

// clip shortens a registry's error message for logs and /readyz: a proxy
// in front of it may answer with a whole HTML page.
func clip(msg string) string {
	const most = 200
	if len(msg) <= most {
		return msg
	}
	return strings.ToValidUTF8(msg[:most], "") + "…"
}

// Register registers schema under subject (the same schema again gets the
// same id) and returns its id: for producers of the demo's Avro heartbeats
// (`flatline simulate --shape avro`).
func (r *Registry) Register(ctx context.Context, subject, schema string) (int, error) {
	ss, err := r.client.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", subject, err)
	}
	return ss.ID, nil
}

// HeartbeatEncoder registers HeartbeatSchema under subject and returns an
// encoder of heartbeats in the wire format with its id.
func (r *Registry) HeartbeatEncoder(ctx context.Context, subject string) (func(Heartbeat) ([]byte, error), error) {
	id, err := r.Register(ctx, subject, HeartbeatSchema)
	if err != nil {
		return nil, err
	}
	schema, err := ParseSchema(HeartbeatSchema)
	if err != nil {
		return nil, err
	}
	return func(h Heartbeat) ([]byte, error) { return Encode(id, schema, h) }, nil
}
