package decode

import (
	"context"
	"errors"

	"github.com/flatline-dev/flatline/decode/avro"
)

// Retry is not a reason of an invalid message: the message cannot be read
// now (the schema registry does not answer) and is to be read again later,
// neither skipped nor dead-lettered.
const Retry Reason = "retry"

// Avro reads values in the schema-registry wire format (format avro): the
// schemas come from the registry and stay cached for the life of the
// process. It owns the registry's client: Close it last.
type Avro struct {
	reg *avro.Registry
	dec *avro.Decoder
}

// NewAvro returns the Avro reader of the registry cfg names
// (ingest.schema_registry), which it does not contact yet.
func NewAvro(cfg avro.Config) (*Avro, error) {
	reg, err := avro.NewRegistry(cfg)
	if err != nil {
		return nil, err
	}
	return &Avro{reg: reg, dec: avro.NewDecoder(reg)}, nil
}

// Healthy is nil, or why the registry cannot be reached (for /readyz).
func (a *Avro) Healthy() error { return a.reg.Healthy() }

// Close releases the registry's client.
func (a *Avro) Close() { a.reg.Close() }

// avroRecord is a decoded Avro value.
type avroRecord struct{ rec avro.Record }

// decodeValue decodes one value: not_object for a value that is not the
// wire format or does not decode with its schema, unknown_schema for an id
// the registry does not know, Retry while it cannot be reached. Each schema
// request is bounded by the registry's timeout.
func (a *Avro) decodeValue(value []byte) (avroRecord, Reason) {
	rec, err := a.dec.Decode(context.Background(), value)
	switch {
	case err == nil:
		return avroRecord{rec}, ""
	case errors.Is(err, avro.ErrUnknownSchema):
		return avroRecord{}, ReasonUnknownSchema
	case errors.Is(err, avro.ErrUnavailable):
		return avroRecord{}, Retry
	}
	return avroRecord{}, ReasonNotObject
}

// find reads a path of the record as a located value, and the time when
// it is one (kindTime).
func (r avroRecord) find(path []string) (found, int64) {
	v, ok := r.rec.Lookup(path)
	if !ok {
		return found{}, 0
	}
	switch v.Kind {
	case avro.KindString:
		return found{raw: []byte(v.Str), kind: kindString, flags: flagLiteral}, 0
	case avro.KindInt:
		return found{raw: []byte(strconvInt(v.Int)), kind: kindNumber}, 0
	case avro.KindFloat:
		return found{raw: []byte(strconvFloat(v.Float)), kind: kindNumber, flags: flagFrac}, 0
	case avro.KindTime:
		return found{kind: kindTime}, v.TimeMs
	case avro.KindNull:
		return found{}, 0
	}
	return found{kind: kindOther}, 0
}
