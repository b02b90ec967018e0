package avro_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// fuzzPaths are the paths looked up in every value FuzzDecode decodes.
var fuzzPaths = [][]string{
	nil, {"device_id"}, {"ts"}, {"class"}, {"timeout_ms"}, {"parent"}, {"meta", "site"},
	{"s"}, {"us"}, {"attrs", "gateway"}, {"opt", "key"}, {"opt", "at"}, {"either"},
	{"next", "next", "next", "s"}, {"arr", "0"}, {"e"}, {"device_id", "x"},
}

// FuzzDecode checks that Decode never panics nor hangs, whatever the bytes,
// against the schemas of a registry in the process (HeartbeatSchema and
// sinkSchema, which has a field of every kind and recurses), that its
// errors are always one of the three sentinels, and that Lookup on what it
// decodes never panics.
//
// The seeds are valid values of both schemas, their truncations, and the
// header's mistakes.
func FuzzDecode(f *testing.F) {
	srv := testenv.SchemaRegistry(f)
	hbID, hbSchema := register(f, srv, "heartbeats-value", avro.HeartbeatSchema)
	sinkID, sinkSchemaParsed := register(f, srv, "sink-value", sinkSchema)
	_, dec := newDecoder(f, configFor(srv))

	hb := heartbeat()
	hb.Parent = ptr("gw-1")
	valid := [][]byte{
		encode(f, hbID, hbSchema, heartbeat()),
		encode(f, hbID, hbSchema, hb),
		encode(f, hbID, hbSchema, avro.Heartbeat{}),
		encode(f, sinkID, sinkSchemaParsed, sinkValue()),
		encode(f, sinkID, sinkSchemaParsed, sink{E: "RED"}),
	}
	for _, v := range valid {
		f.Add(v)
		for _, n := range []int{0, 1, 4, 5, 6, len(v) / 2, len(v) - 1} {
			f.Add(v[:n])
		}
		f.Add(append([]byte{1}, v[1:]...))             // wrong magic byte
		f.Add(append(bytes.Clone(v), 0))               // a byte left over
		f.Add(append(header(999), v[5:]...))           // an unknown id
		f.Add(append(header(sinkID+hbID-1), v[5:]...)) // the other schema's id
	}

	f.Add(append(header(hbID), 0x02, 'd', 0x02, 0x0a)) // class's union branch 5 of 2
	f.Add(append(header(hbID), 0x01))                  // device_id of length -1

	ctx := context.Background()
	f.Fuzz(func(t *testing.T, value []byte) {
		rec, err := dec.Decode(ctx, value)
		if err != nil {
			if !errors.Is(err, avro.ErrBadWire) && !errors.Is(err, avro.ErrUnknownSchema) && !errors.Is(err, avro.ErrUnavailable) {
				t.Fatalf("Decode(% x) = %v, not one of the three sentinels", value, err)
			}
			return
		}
		for _, p := range fuzzPaths {
			v, ok := rec.Lookup(p)
			if !ok && v != (avro.Value{}) {
				t.Fatalf("Lookup(%s) = %+v, false: a missing field with a value", strings.Join(p, "."), v)
			}
		}
	})
}
