package decode

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkDecode measures the decoder on the hot path: one Decoder and one
// Heartbeat reused across messages, as ingest does.
//
//	go test -run '^$' -bench Decode -benchmem ./ingest
func BenchmarkDecode(b *testing.B) {
	kt := time.UnixMilli(testKafkaMs)
	cases := []struct {
		name   string
		format Format
		key    string
		value  string
	}{
		{"json/ts-class", FormatJSON, "d-42",
			`{"device_id":"d-42","ts":1763683200000,"class":"sensor"}`},
		{"json/spec-example", FormatJSON, "d-42",
			`{"device_id": "d-42", "ts": "2025-11-21T00:00:00.123Z", "class": "sensor", "timeout_ms": 30000}`},
		{"json/empty", FormatJSON, "d-42", `{}`},
		{"json/extra-fields", FormatJSON, "d-42",
			`{"device_id":"d-42","ts":1763683200000,"class":"sensor","fw":"1.4.2","rssi":-67,"battery":0.82,` +
				`"gps":{"lat":48.1371,"lon":11.5754,"fix":true},"tags":["roof","north"]}`},
		{"json/escaped-id", FormatJSON, "gerät-42",
			`{"device_id":"ger\u00e4t-42","ts":1763683200000,"class":"sensor"}`},
		{"key", FormatKey, "d-42", `anything at all`},
		{"tombstone", FormatJSON, "d-42", ``},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Format = c.format
			d := mustNewDecoder(cfg)
			key, value := []byte(c.key), []byte(c.value)
			var hb Heartbeat
			if _, ok := d.decodeKV(key, value, kt, &hb); !ok {
				b.Fatal("benchmark message is invalid")
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for b.Loop() {
				d.decodeKV(key, value, kt, &hb)
			}
		})
	}

	// A different device every message (the DeviceID string is then new).
	b.Run("json/ts-class/new-device", func(b *testing.B) {
		d := mustNewDecoder(testConfig())
		const n = 1024
		keys, values := make([][]byte, n), make([][]byte, n)
		for i := range keys {
			id := "d-" + strconv.Itoa(i)
			keys[i] = []byte(id)
			values[i] = []byte(`{"device_id":"` + id + `","ts":1763683200000,"class":"sensor"}`)
		}
		var hb Heartbeat
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d.decodeKV(keys[i%n], values[i%n], kt, &hb)
			i++
		}
	})
}

// BenchmarkDecodeShapes measures the shapes of the README's "Real
// sources", one Decoder and one Heartbeat reused as ingest does.
//
//	go test -run '^$' -bench DecodeShapes -benchmem ./decode
func BenchmarkDecodeShapes(b *testing.B) {
	kt := time.UnixMilli(testKafkaMs)
	cases := []struct {
		name  string
		shape func(*Config)
		msg   Message
	}{
		{"native", shapeNative, Message{Key: []byte("d-42"), Value: []byte(`{"device_id":"d-42","ts":1763683200000,"class":"sensor"}`)}},
		{"emqx5", shapeEMQX5, Message{Value: []byte(emqx5("d-42", `{"ts":1763683200000,"class":"sensor","temp":21.5}`))}},
		{"emqx4", shapeEMQX4, Message{Value: []byte(emqx4("d-42", `{"ts":1763683200000,"class":"sensor","temp":21.5}`))}},
		{"mqtt-topic", shapeMQTTTopic, Message{Key: []byte("devices/d-42/up"), Value: []byte("\x02\x11raw")}},
		{"azure", shapeAzure, Message{Value: []byte(`{"temp":21.5}`), Headers: headers(
			[]byte("iothub-connection-device-id"), AMQPString("d-42"), []byte("iothub-enqueuedtime"), AMQPTimestamp(testKafkaMs))}},
		{"nested", shapeNested, Message{Value: []byte(`{"meta":{"device":{"id":"d-42","class":"sensor"},"time":1763683200}}`)}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cfg := testConfig()
			c.shape(&cfg)
			d := mustNewDecoder(cfg)
			msg := c.msg
			msg.Time = kt
			benchDecode(b, d, msg)
		})
	}
	b.Run("avro", func(b *testing.B) {
		r := newAvroRig(b)
		d := r.decoder(b, DefaultFrom())
		benchDecode(b, d, Message{Key: []byte("d-42"), Value: r.enc(avroHeartbeat("d-42")), Time: kt})
	})
}

// benchDecode decodes msg with d once per iteration, into one Heartbeat
// reused, after checking that it is valid.
func benchDecode(b *testing.B, d *Decoder, msg Message) {
	b.Helper()
	var hb Heartbeat
	if r, ok := d.Decode(&msg, &hb); !ok {
		b.Fatalf("benchmark message is invalid: %s", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(&msg, &hb)
	}
}
