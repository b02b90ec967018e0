package avro_test

import (
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/schemareg"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestMain fails the package's tests when a goroutine they started
// outlives them (testenv.VerifyTestMain).
func TestMain(m *testing.M) { testenv.VerifyTestMain(m) }

// heartbeatFixture is the common start of a test: a registry holding the
// heartbeat schema, a Decoder on it, and a heartbeat value in that schema.
type heartbeatFixture struct {
	srv   *schemareg.Server
	reg   *avro.Registry
	dec   *avro.Decoder
	value []byte
}

func newHeartbeatFixture(t testing.TB) heartbeatFixture {
	t.Helper()
	srv := testenv.SchemaRegistry(t)
	id, schema := register(t, srv, "heartbeats-value", avro.HeartbeatSchema)
	reg, dec := newDecoder(t, configFor(srv))
	return heartbeatFixture{srv: srv, reg: reg, dec: dec, value: encode(t, id, schema, heartbeat())}
}

// newDecoder returns a Decoder on the registry of cfg (url set by the
// caller), closed when the test ends.
func newDecoder(t testing.TB, cfg avro.Config) (*avro.Registry, *avro.Decoder) {
	t.Helper()
	if err := cfg.Validate("ingest.schema_registry"); err != nil {
		t.Fatal(err)
	}
	reg, err := avro.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg, avro.NewDecoder(reg)
}

// configFor is the default configuration pointed at srv.
func configFor(srv *schemareg.Server) avro.Config {
	cfg := avro.DefaultConfig()
	cfg.URL = srv.URL()
	return cfg
}

// register registers schema under subject and parses it.
func register(t testing.TB, srv *schemareg.Server, subject, schema string) (int, hamba.Schema) {
	t.Helper()
	id, err := srv.Register(subject, schema)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := avro.ParseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	return id, parsed
}

// encode is avro.Encode, failing the test on error.
func encode(t testing.TB, id int, schema hamba.Schema, v any) []byte {
	t.Helper()
	b, err := avro.Encode(id, schema, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// header is the wire format's header of schema id.
func header(id int) []byte {
	return []byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
}

func ptr[T any](v T) *T { return &v }

// tsMs is the heartbeats' time: 2026-11-29T10:00:00.123Z.
const tsMs = 1795946400123

// heartbeat is a HeartbeatSchema value with every field set but parent.
func heartbeat() avro.Heartbeat {
	return avro.Heartbeat{
		DeviceID:  "d-42",
		TS:        time.UnixMilli(tsMs),
		Class:     ptr("sensor"),
		TimeoutMs: ptr(int64(30000)),
		Meta:      avro.HeartbeatMeta{Site: "plant-7"},
	}
}

// sinkSchema has a field of every kind, for the decoder's walk of each.
const sinkSchema = `{"type": "record", "name": "Sink", "namespace": "test", "fields": [
  {"name": "i", "type": "int"},
  {"name": "l", "type": "long"},
  {"name": "f", "type": "float"},
  {"name": "d", "type": "double"},
  {"name": "b", "type": "boolean"},
  {"name": "raw", "type": "bytes"},
  {"name": "s", "type": "string"},
  {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
  {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
  {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
  {"name": "day", "type": {"type": "int", "logicalType": "date"}},
  {"name": "arr", "type": {"type": "array", "items": "string"}},
  {"name": "attrs", "type": {"type": "map", "values": "string"}},
  {"name": "opt", "type": ["null", {"type": "record", "name": "Inner", "fields": [
    {"name": "key", "type": "string"},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]}
  ]}]},
  {"name": "either", "type": ["null", "string", "long"]},
  {"name": "next", "type": ["null", "Sink"]}
]}`

type sink struct {
	I      int32             `avro:"i"`
	L      int64             `avro:"l"`
	F      float32           `avro:"f"`
	D      float64           `avro:"d"`
	B      bool              `avro:"b"`
	Raw    []byte            `avro:"raw"`
	S      string            `avro:"s"`
	ID     string            `avro:"id"`
	E      string            `avro:"e"`
	Fx     [4]byte           `avro:"fx"`
	Us     time.Time         `avro:"us"`
	Local  time.Time         `avro:"local"`
	Day    time.Time         `avro:"day"`
	Arr    []string          `avro:"arr"`
	Attrs  map[string]string `avro:"attrs"`
	Opt    *inner            `avro:"opt"`
	Either any               `avro:"either"`
	Next   *sink             `avro:"next"`
}

type inner struct {
	Key string     `avro:"key"`
	At  *time.Time `avro:"at"`
}

// usTime is a timestamp-micros with a fraction of a millisecond.
var usTime = time.UnixMicro(tsMs*1000 + 456)

func sinkValue() sink {
	return sink{
		I: -7, L: 1 << 40, F: 1.5, D: -2.25, B: true, Raw: []byte{0, 1, 2},
		S: "text", ID: "6ba7b810-9dad-11d1-80b4-00c04fd430c8", E: "GREEN", Fx: [4]byte{1, 2, 3, 4},
		Us: usTime, Local: time.UnixMilli(tsMs), Day: time.Unix(86400*20000, 0).UTC(),
		Arr: []string{"a", "b"}, Attrs: map[string]string{"gateway": "gw-1"},
		Opt:    &inner{Key: "k-1", At: ptr(time.UnixMilli(tsMs))},
		Either: int64(12),
		Next:   &sink{S: "second", E: "RED", Day: time.Unix(0, 0).UTC(), Either: "x"},
	}
}
