package avro

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

var (
	// ErrBadWire is a value that is not in the wire format (shorter than 5
	// bytes, a first byte other than 0) or whose body does not decode with
	// its schema (nor with any: a schema that is not Avro or does not parse).
	ErrBadWire = errors.New("not an Avro value in the schema registry's wire format")
	// ErrUnknownSchema is a schema id the registry answered 404 for (or a
	// schema it references, that it does not have).
	ErrUnknownSchema = errors.New("unknown schema id")
	// ErrUnavailable is a registry that could not be reached, timed out, or
	// answered 5xx, 401, 403, 408 or 429. The error wraps the cause.
	ErrUnavailable = errors.New("schema registry unavailable")
)

// Decoder decodes wire-format values, fetching each schema id once. It is
// safe for concurrent use.
type Decoder struct {
	registry *Registry
	header   sr.ConfluentHeader

	mu      sync.RWMutex
	schemas map[int]schemaEntry
	// fetches makes the decoders of many partitions that meet a new id at
	// once wait for one request.
	fetches singleflight.Group
}

// schemaEntry is a cached schema id: its schema, or why no record written
// with it can be read (an ErrBadWire). Outages and unknown ids are not
// cached: the next record asks again.
type schemaEntry struct {
	schema hamba.Schema
	err    error
}

// NewDecoder returns a Decoder that fetches schemas from r.
func NewDecoder(r *Registry) *Decoder {
	return &Decoder{registry: r, schemas: make(map[int]schemaEntry)}
}

// Decode decodes value. Errors match ErrBadWire, ErrUnknownSchema or
// ErrUnavailable. ctx bounds the wait for a schema fetch; the fetch itself
// goes on, bounded by the registry timeout, for others waiting on it.
// The Record does not alias value.
func (d *Decoder) Decode(ctx context.Context, value []byte) (Record, error) {
	id, body, err := d.header.DecodeID(value)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrBadWire, err)
	}
	schema, err := d.schema(ctx, id)
	if err != nil {
		return Record{}, err
	}
	rec, err := decodeBody(schema, body)
	if err != nil {
		return Record{}, fmt.Errorf("%w: schema %d: %w", ErrBadWire, id, err)
	}
	rec.id = id
	return rec, nil
}

// schema returns the schema of id, from the cache or the registry.
func (d *Decoder) schema(ctx context.Context, id int) (hamba.Schema, error) {
	d.mu.RLock()
	e, ok := d.schemas[id]
	d.mu.RUnlock()
	if ok {
		return e.schema, e.err
	}
	fetched := d.fetches.DoChan(strconv.Itoa(id), func() (any, error) {
		// Not the caller's context: others may wait on this fetch after
		// the caller gave up. The registry's HTTP client bounds it.
		s, err := d.registry.schema(context.WithoutCancel(ctx), id)
		if err != nil && !errors.Is(err, ErrBadWire) {
			return nil, err
		}
		d.mu.Lock()
		d.schemas[id] = schemaEntry{schema: s, err: err}
		d.mu.Unlock()
		return s, err
	})
	select {
	case res := <-fetched:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(hamba.Schema), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: schema %d: %w", ErrUnavailable, id, ctx.Err())
	}
}
