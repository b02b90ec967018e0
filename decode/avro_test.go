package decode

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/schemareg"
)

// avroReasons are the reasons TestDecodeAvro covers.
var avroReasons = []Reason{ReasonUnknownSchema, ReasonNotObject, ReasonBadType, ReasonNoDeviceID}

// avroRig is a registry in the process with the heartbeat schema, and a
// Decoder reading values through it.
type avroRig struct {
	srv *schemareg.Server
	id  int
	enc func(avro.Heartbeat) []byte
}

func newAvroRig(t testing.TB) *avroRig {
	t.Helper()
	srv, err := schemareg.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	id, err := srv.Register("device-signals-value", avro.HeartbeatSchema)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := avro.ParseSchema(avro.HeartbeatSchema)
	if err != nil {
		t.Fatal(err)
	}
	return &avroRig{srv: srv, id: id, enc: func(h avro.Heartbeat) []byte {
		b, err := avro.Encode(id, schema, h)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}}
}

func (r *avroRig) decoder(t testing.TB, from From) *Decoder {
	t.Helper()
	cfg := avro.DefaultConfig()
	cfg.URL = r.srv.URL()
	a, err := NewAvro(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	c := testConfig()
	c.Format, c.From, c.Avro = FormatAvro, from, a
	return mustNewDecoder(c)
}

func ptr[T any](v T) *T { return &v }

// TestDecodeAvro reads the schema-registry wire format: fields by path
// through unions and a nested record, timestamp-millis as a time, the id
// from the key or the value, and the reasons of the README's "Real
// sources": unknown_schema, not_object, bad_type, no_device_id.
func TestDecodeAvro(t *testing.T) {
	t.Parallel()
	r := newAvroRig(t)
	at := time.UnixMilli(testKafkaMs - 100)
	full := r.enc(avro.Heartbeat{DeviceID: "d-42", TS: at, Class: ptr("sensor"), TimeoutMs: ptr(int64(45000)), Parent: ptr("gw-1"), Meta: avro.HeartbeatMeta{Site: "site-9"}})
	bare := r.enc(avro.Heartbeat{DeviceID: "d-42", TS: at})
	fromKey := r.decoder(t, DefaultFrom())
	fromValue := r.decoder(t, From{DeviceID: "value:device_id", TS: "value:ts", Class: "value:class", TimeoutMS: "value:timeout_ms", Parent: "value:parent"})
	bySite := r.decoder(t, From{DeviceID: "value:meta.site", TS: "value:ts"})
	classFromTS := r.decoder(t, From{DeviceID: "key", TS: "value:ts", Class: "value:ts"})
	unknown := append([]byte{0, 0, 0, 0x7f, 0x7f}, full[5:]...)

	for _, c := range []struct {
		name   string
		d      *Decoder
		key    string
		value  []byte
		reason Reason
		want   Heartbeat
	}{
		{"every field, id from the key", fromKey, "d-42", full, "", Heartbeat{DeviceID: "d-42", AtMs: at.UnixMilli(), Class: "sensor",
			Timeout: 45 * time.Second, Override: true, HasParent: true, Parent: "gw-1"}},
		{"nulls are absent", fromKey, "d-42", bare, "", Heartbeat{DeviceID: "d-42", AtMs: at.UnixMilli(), Timeout: time.Minute}},
		{"id from the value, key free", fromValue, "gateway-7", full, "", Heartbeat{DeviceID: "d-42", AtMs: at.UnixMilli(), Class: "sensor",
			Timeout: 45 * time.Second, Override: true, HasParent: true, Parent: "gw-1"}},
		{"id through a nested record", bySite, "", full, "", Heartbeat{DeviceID: "site-9", AtMs: at.UnixMilli(), Timeout: time.Minute}},
		{"unknown schema id", fromKey, "d-42", unknown, ReasonUnknownSchema, Heartbeat{}},
		{"wrong magic byte", fromKey, "d-42", append([]byte{1}, full[1:]...), ReasonNotObject, Heartbeat{}},
		{"cut short", fromKey, "d-42", full[:len(full)-3], ReasonNotObject, Heartbeat{}},
		{"json, not avro", fromKey, "d-42", []byte(`{"ts":1}`), ReasonNotObject, Heartbeat{}},
		{"a time as the class", classFromTS, "d-42", full, ReasonBadType, Heartbeat{}},
		{"id path missing", r.decoder(t, From{DeviceID: "value:meta.gateway", TS: "value:ts"}), "", full, ReasonNoDeviceID, Heartbeat{}},
		{"id path through a string", r.decoder(t, From{DeviceID: "value:device_id.x", TS: "value:ts"}), "", full, ReasonNoDeviceID, Heartbeat{}},
		{"null value with the id from the value", fromValue, "d-42", nil, "", Heartbeat{Deviceless: true, AtMs: testKafkaMs}},
		{"tombstone with the id from the key", fromKey, "d-42", nil, "", Heartbeat{DeviceID: "d-42", Tombstone: true, AtMs: testKafkaMs}},
	} {
		var hb Heartbeat
		reason, ok := c.d.Decode(&Message{Key: []byte(c.key), Value: c.value, Time: time.UnixMilli(testKafkaMs)}, &hb)
		if reason != c.reason || ok != (c.reason == "") {
			t.Errorf("%s: Decode = (%q, %v), want %q", c.name, reason, ok, c.reason)
			continue
		}
		if got := plain(hb); ok && got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestDecodeAvroRegistryDown: a registry that cannot be reached is not bad
// input: Decode says Retry (nothing is dead-lettered), the Avro reader says
// why, and the same message decodes once the registry is back.
func TestDecodeAvroRegistryDown(t *testing.T) {
	t.Parallel()
	r := newAvroRig(t)
	d := r.decoder(t, DefaultFrom())
	v := r.enc(avro.Heartbeat{DeviceID: "d-1", TS: time.UnixMilli(testKafkaMs)})
	r.srv.Stop()
	var hb Heartbeat
	msg := &Message{Key: []byte("d-1"), Value: v, Time: time.UnixMilli(testKafkaMs)}
	if reason, ok := d.Decode(msg, &hb); reason != Retry || ok {
		t.Fatalf("registry down: Decode = (%q, %v), want retry", reason, ok)
	}
	if err := d.avro.Healthy(); err == nil {
		t.Error("registry down: Healthy says nil")
	}
	if err := r.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if reason, ok := d.Decode(msg, &hb); !ok || hb.DeviceID != "d-1" || hb.AtMs != testKafkaMs {
		t.Fatalf("registry back: Decode = (%q, %v) %+v", reason, ok, plain(hb))
	}
	if err := d.avro.Healthy(); err != nil {
		t.Errorf("registry back: Healthy = %v", err)
	}
}

// avroHeartbeat is a heartbeat of id with every field set.
func avroHeartbeat(id string) avro.Heartbeat {
	return avro.Heartbeat{DeviceID: id, TS: time.UnixMilli(testKafkaMs), Class: ptr("sensor"), Meta: avro.HeartbeatMeta{Site: "s-1"}}
}
