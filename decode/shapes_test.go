package decode

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shapes of the README's "Real sources": each a configuration as the
// README gives it, and messages as the bridge writes them.
var (
	shapeNative = func(c *Config) {}
	shapeEMQX5  = func(c *Config) {
		c.From = From{DeviceID: "value:clientid", TS: "payload:ts", Class: "payload:class", TimeoutMS: "payload:timeout_ms", Parent: "payload:parent"}
		c.Payload = "value:payload"
	}
	shapeEMQX4 = func(c *Config) {
		shapeEMQX5(c)
		c.From.DeviceID = "value:client_id"
		c.PayloadEncoding = PayloadBase64JSON
	}
	shapeMQTTTopic = func(c *Config) {
		c.Format = FormatKey
		c.From = From{DeviceID: "key:^devices/([^/]+)/", TS: "kafka"}
	}
	shapeAzure = func(c *Config) {
		c.Format = FormatKey
		c.From = From{DeviceID: "header:iothub-connection-device-id", TS: "header:iothub-enqueuedtime"}
	}
	shapeHeaders = func(c *Config) {
		c.From = From{DeviceID: "header:device", TS: "header:ts", Class: "header:class", TimeoutMS: "header:timeout", Parent: "header:gw"}
	}
	shapeNested = func(c *Config) {
		c.From = From{DeviceID: "value:meta.device.id", TS: "value:meta.time", Class: "value:meta.device.class", TimeoutMS: "value:timeout_ms", Parent: "value:meta.gateway"}
	}
)

// emqx5 returns EMQX 5's Kafka sink value for client id and payload.
func emqx5(id, payload string) string {
	return `{"id":"0006…","clientid":` + strconv.Quote(id) + `,"username":"u","topic":"devices/` + id + `/up",` +
		`"timestamp":1763683200000,"qos":1,"payload":` + strconv.Quote(payload) + `}`
}

func emqx4(id, payload string) string {
	return `{"client_id":` + strconv.Quote(id) + `,"topic":"t/1","qos":0,"payload":"` +
		base64.StdEncoding.EncodeToString([]byte(payload)) + `","ts":1763683200000}`
}

// headers builds a header section from name, value pairs.
func headers(kv ...[]byte) []byte {
	var body []byte
	for i := 0; i+1 < len(kv); i += 2 {
		body = AppendHeader(body, string(kv[i]), kv[i+1])
	}
	return AppendHeaders(nil, len(kv)/2, body)
}

func s(v string) []byte { return []byte(v) }

type shapeCase struct {
	name    string
	shape   func(*Config)
	msg     Message
	reason  Reason
	want    Heartbeat
	wantNil bool // want is not built by hb (a tombstone, a deviceless value)
}

var shapeCases = func() []shapeCase {
	k := testKafkaMs
	hb := func(edit func(*Heartbeat)) Heartbeat {
		h := Heartbeat{DeviceID: "d-42", AtMs: k, Timeout: time.Minute}
		if edit != nil {
			edit(&h)
		}
		return h
	}
	return []shapeCase{
		// EMQX 5: the id in the rule's JSON, the device's message a JSON string.
		{name: "emqx5", shape: shapeEMQX5, msg: Message{Key: s("anything"), Value: s(emqx5("d-42", `{"ts":1763683200100,"class":"sensor","temp":21.5}`))},
			want: hb(func(h *Heartbeat) { h.AtMs = 1763683200100; h.Class = "sensor"; h.Timeout = 30 * time.Second })},
		{name: "emqx5 null key", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{}`))}, want: hb(nil)},
		{name: "emqx5 payload seconds", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"ts":1763683200.2}`))},
			want: hb(func(h *Heartbeat) { h.AtMs = 1763683200200 })},
		{name: "emqx5 payload parent", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"parent":"gw-1"}`))},
			want: hb(func(h *Heartbeat) { h.HasParent = true; h.Parent = "gw-1" })},
		{name: "emqx5 payload parent self", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"parent":"d-42"}`))},
			want: hb(func(h *Heartbeat) { h.HasParent = true; h.SelfParent = true })},
		{name: "emqx5 payload parent removed", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"parent":""}`))},
			want: hb(func(h *Heartbeat) { h.HasParent = true })},
		{name: "emqx5 escaped id", shape: shapeEMQX5, msg: Message{Value: s(`{"clientid":"d-\u0034\u0032","payload":"{}"}`)}, want: hb(nil)},
		{name: "emqx5 no clientid", shape: shapeEMQX5, msg: Message{Value: s(`{"payload":"{}"}`)}, reason: ReasonNoDeviceID},
		{name: "emqx5 empty clientid", shape: shapeEMQX5, msg: Message{Value: s(`{"clientid":"","payload":"{}"}`)}, reason: ReasonNoDeviceID},
		{name: "emqx5 clientid number", shape: shapeEMQX5, msg: Message{Value: s(`{"clientid":42,"payload":"{}"}`)}, reason: ReasonBadType},
		{name: "emqx5 clientid too long", shape: shapeEMQX5, msg: Message{Value: s(emqx5(strings.Repeat("x", 257), `{}`))}, reason: ReasonKeyTooLong},
		{name: "emqx5 payload missing", shape: shapeEMQX5, msg: Message{Value: s(`{"clientid":"d-42"}`)}, reason: ReasonBadPayload},
		{name: "emqx5 payload not a string", shape: shapeEMQX5, msg: Message{Value: s(`{"clientid":"d-42","payload":{"ts":1}}`)}, reason: ReasonBadPayload},
		{name: "emqx5 payload not json", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `21.5 C`))}, reason: ReasonBadPayload},
		{name: "emqx5 payload json array", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `[1,2]`))}, reason: ReasonBadPayload},
		{name: "emqx5 payload trailing data", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{} x`))}, reason: ReasonBadPayload},
		{name: "emqx5 payload bad ts", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"ts":"soon"}`))}, reason: ReasonBadTS},
		{name: "emqx5 payload bool ts", shape: shapeEMQX5, msg: Message{Value: s(emqx5("d-42", `{"ts":true}`))}, reason: ReasonBadType},
		{name: "emqx5 value not json", shape: shapeEMQX5, msg: Message{Value: s(`clientid=d-42`)}, reason: ReasonNotObject},
		{name: "emqx5 null value is deviceless", shape: shapeEMQX5, msg: Message{Key: s("d-42")}, want: Heartbeat{Deviceless: true, AtMs: k}, wantNil: true},
		{name: "emqx5 device_id in value is free", shape: shapeEMQX5, msg: Message{Key: s("other"), Value: s(`{"device_id":"x","clientid":"d-42","payload":"{}"}`)}, want: hb(nil)},

		// EMQX 4: client_id, and the payload in base64.
		{name: "emqx4", shape: shapeEMQX4, msg: Message{Value: s(emqx4("d-42", `{"ts":1763683200300,"timeout_ms":5000}`))},
			want: hb(func(h *Heartbeat) { h.AtMs = 1763683200300; h.Timeout = 5 * time.Second; h.Override = true })},
		{name: "emqx4 unpadded base64", shape: shapeEMQX4, msg: Message{Value: s(`{"client_id":"d-42","payload":"` + base64.RawStdEncoding.EncodeToString([]byte(`{"a":1}`)) + `"}`)}, want: hb(nil)},
		{name: "emqx4 payload not base64", shape: shapeEMQX4, msg: Message{Value: s(`{"client_id":"d-42","payload":"{\"ts\":1}"}`)}, reason: ReasonBadPayload},
		{name: "emqx4 base64 of text", shape: shapeEMQX4, msg: Message{Value: s(emqx4("d-42", `on`))}, reason: ReasonBadPayload},

		// MQTT topics as keys: HiveMQ, the Confluent MQTT source, Waterstream.
		{name: "mqtt topic", shape: shapeMQTTTopic, msg: Message{Key: s("devices/d-42/up"), Value: s("\x01\x02 raw bytes")}, want: hb(nil)},
		{name: "mqtt topic tombstone", shape: shapeMQTTTopic, msg: Message{Key: s("devices/d-42/up")}, want: Heartbeat{DeviceID: "d-42", Tombstone: true, AtMs: k}, wantNil: true},
		{name: "mqtt topic no match", shape: shapeMQTTTopic, msg: Message{Key: s("sensors/d-42"), Value: s("x")}, reason: ReasonNoDeviceID},
		{name: "mqtt topic empty capture", shape: shapeMQTTTopic, msg: Message{Key: s("devices//up"), Value: s("x")}, reason: ReasonNoDeviceID},
		{name: "mqtt topic null key", shape: shapeMQTTTopic, msg: Message{Value: s("x")}, reason: ReasonNoDeviceID},
		{name: "mqtt topic id not utf8", shape: shapeMQTTTopic, msg: Message{Key: s("devices/\xff/up"), Value: s("x")}, reason: ReasonKeyNotUTF8},
		{name: "mqtt topic id too long", shape: shapeMQTTTopic, msg: Message{Key: s("devices/" + strings.Repeat("a", 257) + "/up"), Value: s("x")}, reason: ReasonKeyTooLong},

		// Azure IoT Hub's Kafka endpoint: AMQP-typed headers.
		{name: "azure", shape: shapeAzure, msg: Message{Key: nil, Value: s(`{"temp":1}`), Headers: headers(
			s("iothub-connection-device-id"), AMQPString("d-42"), s("iothub-enqueuedtime"), AMQPTimestamp(k-200))},
			want: hb(func(h *Heartbeat) { h.AtMs = k - 200 })},
		{name: "azure str32 id", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(
			s("iothub-connection-device-id"), append([]byte{0xB1, 0, 0, 0, 4}, "d-42"...))}, want: hb(nil)},
		{name: "azure no id header", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(s("other"), s("d-42"))}, reason: ReasonNoDeviceID},
		{name: "azure empty id header", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(s("iothub-connection-device-id"), s(""))}, reason: ReasonNoDeviceID},
		{name: "azure cut str8", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(s("iothub-connection-device-id"), []byte{0xA1, 9, 'd'})}, reason: ReasonBadType},
		{name: "azure tombstone", shape: shapeAzure, msg: Message{Headers: headers(s("iothub-connection-device-id"), AMQPString("d-42"))},
			want: Heartbeat{DeviceID: "d-42", Tombstone: true, AtMs: k}, wantNil: true},
		{name: "azure time header skewed", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(
			s("iothub-connection-device-id"), AMQPString("d-42"), s("iothub-enqueuedtime"), AMQPTimestamp(k-5000))},
			want: hb(func(h *Heartbeat) { h.SkewCorrected = true })},
		{name: "azure time header cut", shape: shapeAzure, msg: Message{Value: s("x"), Headers: headers(
			s("iothub-connection-device-id"), AMQPString("d-42"), s("iothub-enqueuedtime"), []byte{0x83, 1})}, reason: ReasonBadType},

		// Plain text headers for every field.
		{name: "headers", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("d-42"), s("ts"), s("2025-11-21T00:00:00.3Z"),
			s("class"), s("sensor"), s("timeout"), s("45000"), s("gw"), s("gw-7"))},
			want: hb(func(h *Heartbeat) {
				h.AtMs = 1763683200300
				h.Class, h.Timeout, h.Override = "sensor", 45*time.Second, true
				h.HasParent, h.Parent = true, "gw-7"
			})},
		{name: "headers last repeat wins", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("x"), s("device"), s("d-42"))}, want: hb(nil)},
		{name: "headers ts in seconds", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("d-42"), s("ts"), s("1763683200"))},
			want: hb(func(h *Heartbeat) { h.AtMs = 1763683200000 })},
		{name: "headers timeout not a number", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("d-42"), s("timeout"), s("soon"))},
			want: hb(func(h *Heartbeat) { h.TimeoutOutOfRange = true })},
		{name: "headers bad ts", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("d-42"), s("ts"), s("noon"))}, reason: ReasonBadTS},
		{name: "headers null header", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), nil)}, reason: ReasonNoDeviceID},
		{name: "headers malformed section", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: []byte{0x02, 0x10, 'd'}}, reason: ReasonNoDeviceID},
		{name: "headers id not utf8", shape: shapeHeaders, msg: Message{Value: s(`{}`), Headers: headers(s("device"), s("d-\xc3"))}, reason: ReasonKeyNotUTF8},

		// Nested paths.
		{name: "nested", shape: shapeNested, msg: Message{Value: s(`{"meta":{"device":{"id":"d-42","class":"sensor"},"time":1763683200.5,"gateway":"gw"}}`)},
			want: hb(func(h *Heartbeat) {
				h.AtMs = 1763683200500
				h.Class, h.Timeout = "sensor", 30*time.Second
				h.HasParent, h.Parent = true, "gw"
			})},
		{name: "nested escaped keys", shape: shapeNested, msg: Message{Value: s(`{"m\u0065ta":{"device":{"\u0069d":"d-42"}}}`)}, want: hb(nil)},
		{name: "nested last member wins whole", shape: shapeNested, msg: Message{Value: s(`{"meta":{"device":{"id":"x","class":"sensor"}},"meta":{"device":{"id":"d-42"}}}`)}, want: hb(nil)},
		{name: "nested through a string", shape: shapeNested, msg: Message{Value: s(`{"meta":"d-42"}`)}, reason: ReasonNoDeviceID},
		{name: "nested through an array", shape: shapeNested, msg: Message{Value: s(`{"meta":[{"device":{"id":"d-42"}}]}`)}, reason: ReasonNoDeviceID},
		{name: "nested object as id", shape: shapeNested, msg: Message{Value: s(`{"meta":{"device":{"id":{"v":1}}}}`)}, reason: ReasonBadType},
		{name: "nested bad json inside", shape: shapeNested, msg: Message{Value: s(`{"meta":{"device":{"id":"d-42",}}}`)}, reason: ReasonNotObject},
		{name: "nested parent number", shape: shapeNested, msg: Message{Value: s(`{"meta":{"device":{"id":"d-42"},"gateway":7}}`)}, reason: ReasonBadType},
		{name: "nested null value is deviceless", shape: shapeNested, msg: Message{Value: s(``)}, want: Heartbeat{Deviceless: true, AtMs: k}, wantNil: true},

		// The native shape's parent.
		{name: "native parent", shape: shapeNative, msg: Message{Key: s("d-42"), Value: s(`{"parent":"gw-1"}`)}, want: hb(func(h *Heartbeat) { h.HasParent = true; h.Parent = "gw-1" })},
		{name: "native parent too long", shape: shapeNative, msg: Message{Key: s("d-42"), Value: s(`{"parent":"` + strings.Repeat("g", 257) + `"}`)}, reason: ReasonBadType},
	}
}()

func TestDecodeShapes(t *testing.T) {
	t.Parallel()
	for _, c := range shapeCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			c.shape(&cfg)
			d, err := NewDecoder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			msg := c.msg
			msg.Time = time.UnixMilli(testKafkaMs)
			hb := Heartbeat{DeviceID: "stale", Parent: "stale", Class: "stale"}
			reason, ok := d.Decode(&msg, &hb)
			if reason != c.reason || ok != (c.reason == "") {
				t.Fatalf("Decode = (%q, %v), want (%q, %v)", reason, ok, c.reason, c.reason == "")
			}
			if !ok {
				return
			}
			want, got := c.want, plain(hb)
			if !got.HasParent {
				got.Parent = "" // kept from the last message for reuse; only HasParent says
			}
			if got.Deviceless {
				got.DeviceID = ""
			}
			if got != want {
				t.Errorf("Decode:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestDecodeShapesAllocations: reading a shape other than the native one
// may allocate, but a bounded amount; EMQX 5's and an MQTT topic's, the
// shapes the README's cost targets name, allocate nothing once their
// buffers have grown, for a device seen before.
func TestDecodeShapesAllocations(t *testing.T) { // not parallel: AllocsPerRun
	for _, c := range []struct {
		name  string
		shape func(*Config)
		msg   Message
		most  float64
	}{
		{"emqx5", shapeEMQX5, Message{Value: s(emqx5("d-42", `{"ts":1763683200100,"class":"sensor"}`))}, 0},
		{"emqx4", shapeEMQX4, Message{Value: s(emqx4("d-42", `{"ts":1763683200100}`))}, 0},
		{"mqtt topic", shapeMQTTTopic, Message{Key: s("devices/d-42/up"), Value: s("x")}, 0},
		{"azure", shapeAzure, Message{Value: s("x"), Headers: headers(s("iothub-connection-device-id"), AMQPString("d-42"))}, 0},
		{"nested", shapeNested, Message{Value: s(`{"meta":{"device":{"id":"d-42"}}}`)}, 0},
	} {
		cfg := testConfig()
		c.shape(&cfg)
		d := mustNewDecoder(cfg)
		c.msg.Time = time.UnixMilli(testKafkaMs)
		var hb Heartbeat
		if r, ok := d.Decode(&c.msg, &hb); !ok {
			t.Fatalf("%s: %s", c.name, r)
		}
		if n := testing.AllocsPerRun(100, func() { d.Decode(&c.msg, &hb) }); n > c.most {
			t.Errorf("%s: %v allocations a message, want at most %v", c.name, n, c.most)
		}
	}
}

func TestConfigRefusesBadExpressions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown prefix", func(c *Config) { c.From = DefaultFrom(); c.From.DeviceID = "topic:x" }, "ingest.from.device_id:"},
		{"regex does not compile", func(c *Config) { c.From = DefaultFrom(); c.From.DeviceID = "key:([a-z" }, "ingest.from.device_id: \"key:([a-z\": the regex does not compile"},
		{"regex without group", func(c *Config) { c.From = DefaultFrom(); c.From.DeviceID = "key:^devices/" }, "needs a capture group"},
		{"payload without ingest.payload", func(c *Config) { c.From = DefaultFrom(); c.From.TS = "payload:ts" }, "ingest.from.ts: \"payload:ts\" needs ingest.payload"},
		{"kafka as device id", func(c *Config) { c.From = DefaultFrom(); c.From.DeviceID = "kafka" }, "ingest.from.device_id: \"kafka\" is not a source of device_id"},
		{"key as class", func(c *Config) { c.From = DefaultFrom(); c.From.Class = "key" }, "ingest.from.class: \"key\" is not a source"},
		{"empty path key", func(c *Config) { c.From = DefaultFrom(); c.From.Class = "value:meta..class" }, "ingest.from.class: \"value:meta..class\": a path is keys joined by dots"},
		{"empty header name", func(c *Config) { c.From = DefaultFrom(); c.From.TS = "header:" }, "ingest.from.ts: \"header:\": header: needs a header name"},
		{"value under format key", func(c *Config) { c.Format = FormatKey; c.From = DefaultFrom(); c.From.TS = "value:time" }, "ingest.from.ts: \"value:time\" reads the value, which ingest.format: key does not read"},
		{"payload under format key", func(c *Config) { c.Format = FormatKey; c.Payload = "value:payload" }, "ingest.payload:"},
		{"payload not value", func(c *Config) { c.Payload = "header:p" }, "ingest.payload: \"header:p\""},
		{"payload encoding", func(c *Config) { c.PayloadEncoding = "hex" }, "ingest.payload_encoding: want json or base64-json, got \"hex\""},
		{"format", func(c *Config) { c.Format = "xml" }, "ingest.format: want json, key or avro, got \"xml\""},
		{"avro without registry", func(c *Config) { c.Format = FormatAvro }, "ingest.format: avro needs ingest.schema_registry.url"},
	} {
		cfg := testConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error with %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, err)
		}
	}
	// Format key keeps its value defaults inactive rather than refusing them.
	cfg := testConfig()
	cfg.Format = FormatKey
	cfg.From = DefaultFrom()
	if err := cfg.Validate(); err != nil {
		t.Errorf("format key with the default expressions: %v", err)
	}
}
