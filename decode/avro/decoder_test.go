package avro_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/testenv"
)

type lookupCase struct {
	path string // dot-separated
	want avro.Value
	ok   bool
}

func checkLookups(t *testing.T, rec avro.Record, cases []lookupCase) {
	t.Helper()
	for _, c := range cases {
		var path []string
		if c.path != "" {
			path = strings.Split(c.path, ".")
		}
		got, ok := rec.Lookup(path)
		if ok != c.ok || got != c.want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}

func TestDecodeReadsHeartbeatFieldsThroughUnionsAndNestedRecords(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, schema := register(t, srv, "heartbeats-value", avro.HeartbeatSchema)
	_, dec := newDecoder(t, configFor(srv))

	rec, err := dec.Decode(testenv.Context(t, 10*time.Second), encode(t, id, schema, heartbeat()))
	if err != nil {
		t.Fatal(err)
	}
	if rec.SchemaID() != id {
		t.Errorf("SchemaID() = %d, want %d", rec.SchemaID(), id)
	}
	checkLookups(t, rec, []lookupCase{
		{"device_id", avro.Value{Kind: avro.KindString, Str: "d-42"}, true},
		{"ts", avro.Value{Kind: avro.KindTime, TimeMs: tsMs}, true},
		{"class", avro.Value{Kind: avro.KindString, Str: "sensor"}, true},
		{"timeout_ms", avro.Value{Kind: avro.KindInt, Int: 30000}, true},
		{"parent", avro.Value{Kind: avro.KindNull}, true},
		{"meta.site", avro.Value{Kind: avro.KindString, Str: "plant-7"}, true},
		{"meta", avro.Value{Kind: avro.KindOther}, true},
		{"", avro.Value{Kind: avro.KindOther}, true},
		{"missing", avro.Value{}, false},
		{"meta.missing", avro.Value{}, false},
		{"device_id.x", avro.Value{}, false}, // through a string
		{"class.x", avro.Value{}, false},     // through a union's string branch
		{"parent.x", avro.Value{}, false},    // through a union's null
		{"meta.site.x", avro.Value{}, false},
	})
	if _, ok := (avro.Record{}).Lookup([]string{"device_id"}); ok {
		t.Error("the zero Record has a device_id")
	}
}

func TestDecodeReadsEveryKind(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, schema := register(t, srv, "sink-value", sinkSchema)
	_, dec := newDecoder(t, configFor(srv))

	rec, err := dec.Decode(testenv.Context(t, 10*time.Second), encode(t, id, schema, sinkValue()))
	if err != nil {
		t.Fatal(err)
	}
	other := avro.Value{Kind: avro.KindOther}
	checkLookups(t, rec, []lookupCase{
		{"i", avro.Value{Kind: avro.KindInt, Int: -7}, true},
		{"l", avro.Value{Kind: avro.KindInt, Int: 1 << 40}, true},
		{"f", avro.Value{Kind: avro.KindFloat, Float: 1.5}, true},
		{"d", avro.Value{Kind: avro.KindFloat, Float: -2.25}, true},
		{"b", other, true},
		{"raw", other, true},
		{"s", avro.Value{Kind: avro.KindString, Str: "text"}, true},
		{"id", avro.Value{Kind: avro.KindString, Str: "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}, true},
		{"e", avro.Value{Kind: avro.KindString, Str: "GREEN"}, true},
		{"fx", other, true},
		// timestamp-micros: the fraction of a millisecond truncated.
		{"us", avro.Value{Kind: avro.KindTime, TimeMs: tsMs}, true},
		{"local", avro.Value{Kind: avro.KindInt, Int: tsMs}, true},
		{"day", other, true},
		{"arr", other, true},
		{"arr.0", avro.Value{}, false},
		{"attrs.gateway", avro.Value{Kind: avro.KindString, Str: "gw-1"}, true},
		{"attrs.other", avro.Value{}, false},
		{"attrs", other, true},
		{"opt.key", avro.Value{Kind: avro.KindString, Str: "k-1"}, true},
		{"opt.at", avro.Value{Kind: avro.KindTime, TimeMs: tsMs}, true},
		{"either", avro.Value{Kind: avro.KindInt, Int: 12}, true},
		{"next.s", avro.Value{Kind: avro.KindString, Str: "second"}, true},
		{"next.either", avro.Value{Kind: avro.KindString, Str: "x"}, true},
		{"next.opt", avro.Value{Kind: avro.KindNull}, true},
		{"next.opt.key", avro.Value{}, false},
		{"next.next", avro.Value{Kind: avro.KindNull}, true},
	})
}

func TestDecodeRefusesWhatIsNotTheWireFormatOrItsSchema(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, schema := register(t, srv, "heartbeats-value", avro.HeartbeatSchema)
	arrID, _ := register(t, srv, "arrays-value", `{"type": "record", "name": "Arr", "fields": [{"name": "a", "type": {"type": "array", "items": "string"}}]}`)
	sinkID, _ := register(t, srv, "sink-value", sinkSchema)
	nodeID, _ := register(t, srv, "nodes-value", `{"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}`)
	_, dec := newDecoder(t, configFor(srv))
	valid := encode(t, id, schema, heartbeat())

	cases := map[string][]byte{
		"empty":               {},
		"shorter than 5":      valid[:4],
		"header only":         valid[:5],
		"magic byte 1":        append([]byte{1}, valid[1:]...),
		"JSON":                []byte(`{"device_id":"d-42","ts":1795946400123}`),
		"truncated":           valid[:len(valid)-1],
		"a byte left over":    append(bytes.Clone(valid), 0),
		"negative length":     append(header(id), 0x01),                  // device_id of length -1
		"union branch 5":      append(header(id), 0x02, 'd', 0x02, 0x0a), // class branch 5
		"string past the end": append(header(id), 0x7e, 'd'),             // length 63, one byte
		// Sink's fields all zero but raw's length, -1 (zigzag 0x01).
		"negative bytes length": append(append(header(sinkID), make([]byte, 15)...), append([]byte{0x01}, make([]byte, 15)...)...),
		// An array claiming 2^60 strings with no bytes behind them must
		// fail at the first, not run for ever.
		"2^60 items": append(header(arrID), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20),
		// A recursive schema nests as deep as the bytes go.
		"nested 100 deep": append(append(header(nodeID), bytes.Repeat([]byte{0x02}, 100)...), 0x00),
	}
	for name, value := range cases {
		rec, err := dec.Decode(testenv.Context(t, 10*time.Second), value)
		if !errors.Is(err, avro.ErrBadWire) {
			t.Errorf("%s: Decode = %+v, %v; want ErrBadWire", name, rec, err)
		}
		if errors.Is(err, avro.ErrUnknownSchema) || errors.Is(err, avro.ErrUnavailable) {
			t.Errorf("%s: %v matches another sentinel too", name, err)
		}
	}

	// What is valid around those limits.
	for name, value := range map[string][]byte{
		"nested 10 deep": append(append(header(nodeID), bytes.Repeat([]byte{0x02}, 10)...), 0x00),
		"empty array":    append(header(arrID), 0x00),
		"sink of zeros":  append(header(sinkID), make([]byte, 31)...),
		// A block of 1 item "x", then one of -1 items (1, and its size in
		// bytes, 2) "y", then the end.
		"two blocks": append(header(arrID), 0x02, 0x02, 'x', 0x01, 0x04, 0x02, 'y', 0x00),
	} {
		if _, err := dec.Decode(testenv.Context(t, 10*time.Second), value); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecodeReadsAnArrayOfNullsWithoutIteratingIt(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, _ := register(t, srv, "nulls-value", `{"type": "record", "name": "Nulls", "fields": [
		{"name": "n", "type": {"type": "array", "items": "null"}}, {"name": "s", "type": "string"}]}`)
	_, dec := newDecoder(t, configFor(srv))
	// 2^60 nulls take no bytes: valid, and read in no time.
	value := append(header(id), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00, 0x02, 'z')
	rec, err := dec.Decode(testenv.Context(t, 10*time.Second), value)
	if err != nil {
		t.Fatal(err)
	}
	checkLookups(t, rec, []lookupCase{{"s", avro.Value{Kind: avro.KindString, Str: "z"}, true}})
}

func TestDecodeDoesNotAliasTheValue(t *testing.T) {
	f := newHeartbeatFixture(t)
	dec, value := f.dec, f.value
	rec, err := dec.Decode(testenv.Context(t, 10*time.Second), value)
	if err != nil {
		t.Fatal(err)
	}
	for i := range value {
		value[i] = 'X' // Kafka reuses its fetch buffers
	}
	checkLookups(t, rec, []lookupCase{
		{"device_id", avro.Value{Kind: avro.KindString, Str: "d-42"}, true},
		{"meta.site", avro.Value{Kind: avro.KindString, Str: "plant-7"}, true},
	})
}

func TestUnknownSchemaIsNotCachedAndFoundOnceRegistered(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	first, _ := register(t, srv, "other-value", `{"type": "record", "name": "Other", "fields": []}`)
	reg, dec := newDecoder(t, configFor(srv))
	schema, err := avro.ParseSchema(avro.HeartbeatSchema)
	if err != nil {
		t.Fatal(err)
	}
	// The registry numbers schemas in order: the next one registered.
	next := first + 1
	value := encode(t, next, schema, heartbeat())
	ctx := testenv.Context(t, 10*time.Second)

	for range 2 {
		before := srv.Requests()
		if _, err := dec.Decode(ctx, value); !errors.Is(err, avro.ErrUnknownSchema) {
			t.Fatalf("Decode before registering = %v, want ErrUnknownSchema", err)
		}
		if srv.Requests() == before {
			t.Fatal("an unknown id was answered from a cache, not asked again")
		}
	}
	if err := reg.Healthy(); err != nil {
		t.Errorf("Healthy() = %v after 404s, want nil: the registry answered", err)
	}

	if id, _ := register(t, srv, "heartbeats-value", avro.HeartbeatSchema); id != next {
		t.Fatalf("registered as %d, want %d", id, next)
	}
	rec, err := dec.Decode(ctx, value)
	if err != nil {
		t.Fatalf("Decode after registering: %v", err)
	}
	checkLookups(t, rec, []lookupCase{{"device_id", avro.Value{Kind: avro.KindString, Str: "d-42"}, true}})
}

func TestDecodeFetchesEachSchemaOnce(t *testing.T) {
	f := newHeartbeatFixture(t)
	srv, dec, value := f.srv, f.dec, f.value
	ctx := testenv.Context(t, 10*time.Second)

	// Many partitions meeting a new id at once send one request.
	const decoders = 16
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, decoders)
	ready.Add(decoders)
	done.Add(decoders)
	for range decoders {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			_, err := dec.Decode(ctx, value)
			errs <- err
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("%d requests for %d decodes of one new id, want 1", got, decoders)
	}
	for range 100 {
		if _, err := dec.Decode(ctx, value); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("%d requests after 100 more decodes, want still 1: the schema is cached", got)
	}
}

func TestSchemaThatIsNotReadableAvroIsBadWireAndCached(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	id, err := srv.Register("broken-value", `{"type": "record", "name": "Broken", "fields": [{"name": "a", "type": "NoSuchType"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	_, dec := newDecoder(t, configFor(srv))
	value := append(header(id), 0x02)
	ctx := testenv.Context(t, 10*time.Second)
	for range 2 {
		if _, err := dec.Decode(ctx, value); !errors.Is(err, avro.ErrBadWire) {
			t.Fatalf("Decode = %v, want ErrBadWire", err)
		}
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("%d requests for two decodes, want 1: a schema id's schema never changes", got)
	}
}

func TestSchemaReferencesAreFetched(t *testing.T) {
	srv := testenv.SchemaRegistry(t)
	_, err := srv.Register("meta", `{"type": "record", "name": "Meta", "namespace": "dev.flatline", "fields": [{"name": "site", "type": "string"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	id, err := srv.Register("refs-value",
		`{"type": "record", "name": "Beat", "namespace": "dev.flatline", "fields": [
			{"name": "device_id", "type": "string"}, {"name": "meta", "type": "Meta"}]}`,
		sr.SchemaReference{Name: "dev.flatline.Meta", Subject: "meta", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, dec := newDecoder(t, configFor(srv))
	value := append(header(id), 0x04, 'd', '1', 0x04, 's', '9')
	rec, err := dec.Decode(testenv.Context(t, 10*time.Second), value)
	if err != nil {
		t.Fatal(err)
	}
	checkLookups(t, rec, []lookupCase{
		{"device_id", avro.Value{Kind: avro.KindString, Str: "d1"}, true},
		{"meta.site", avro.Value{Kind: avro.KindString, Str: "s9"}, true},
	})
}

func TestEncodeWritesTheWireFormat(t *testing.T) {
	schema, err := avro.ParseSchema(avro.HeartbeatSchema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Encode(0x01020304, schema, heartbeat())
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 1, 2, 3, 4, 0x08, 'd', '-', '4', '2'}; !bytes.HasPrefix(b, want) {
		t.Errorf("Encode = % x, want it to start % x", b, want)
	}
	for _, id := range []int{-1, 1 << 32} {
		if _, err := avro.Encode(id, schema, heartbeat()); err == nil {
			t.Errorf("Encode(%d) took an id the header cannot hold", id)
		}
	}
	if _, err := avro.Encode(1, schema, struct{ X int }{}); err == nil {
		t.Error("Encode took a value its schema does not fit")
	}
}

// A value decoded while the caller gives up is an outage for the caller,
// not a failure of the registry.
func TestDecodeReturnsWhenTheCallerGivesUp(t *testing.T) {
	hung := startHungServer(t)
	cfg := avro.DefaultConfig()
	cfg.URL = hung
	cfg.Timeout = 30 * time.Second
	reg, dec := newDecoder(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dec.Decode(ctx, []byte{0, 0, 0, 0, 1, 0})
	if !errors.Is(err, avro.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Decode with a cancelled context = %v, want ErrUnavailable wrapping context.Canceled", err)
	}
	if err := reg.Healthy(); err != nil {
		t.Errorf("Healthy() = %v, want nil: the caller gave up, the registry did not fail", err)
	}
}
