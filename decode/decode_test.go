package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/timeouts"
)

// testKafkaMs is the Kafka timestamp of the table's messages.
const testKafkaMs int64 = 1763683200123

func testConfig() Config {
	return Config{
		Format:        FormatJSON,
		MaxSkew:       500 * time.Millisecond,
		MaxValueBytes: 64 << 10,
		Timeouts: timeouts.Config{
			Default: time.Minute,
			Min:     time.Second,
			Max:     168 * time.Hour,
			Classes: map[string]time.Duration{
				"sensor":  30 * time.Second,
				"gateway": 5 * time.Minute,
				"gerät":   2 * time.Minute,
			},
		},
	}
}

// decodeCase is one message of the decoder's table; the fuzz target seeds
// its corpus with them too.
type decodeCase struct {
	name       string
	key, value []byte
	strict     bool   // timeouts.strict_classes
	format     Format // default json
	kafkaMs    int64  // default testKafkaMs
	reason     Reason // "" = valid
	want       Heartbeat
}

func (c decodeCase) decoder() *Decoder {
	cfg := testConfig()
	cfg.Timeouts.StrictClasses = c.strict
	if c.format != "" {
		cfg.Format = c.format
	}
	return mustNewDecoder(cfg)
}

func (c decodeCase) kafkaTime() time.Time {
	if c.kafkaMs == 0 {
		return time.UnixMilli(testKafkaMs)
	}
	return time.UnixMilli(c.kafkaMs)
}

// valid is the heartbeat of device d-1 at the Kafka time with the default
// timeout, changed by edit.
func valid(edit func(*Heartbeat)) Heartbeat {
	hb := Heartbeat{DeviceID: "d-1", AtMs: testKafkaMs, Timeout: time.Minute}
	if edit != nil {
		edit(&hb)
	}
	return hb
}

func ok(name, value string, edit func(*Heartbeat)) decodeCase {
	return decodeCase{name: name, key: []byte("d-1"), value: []byte(value), want: valid(edit)}
}

func bad(name, value string, reason Reason) decodeCase {
	return decodeCase{name: name, key: []byte("d-1"), value: []byte(value), reason: reason}
}

// nested returns {"x": [[[ ... ]]]} with depth arrays inside the object.
func nested(depth int) string {
	return `{"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

var decodeCases = func() []decodeCase {
	k := testKafkaMs
	cases := []decodeCase{
		// Tombstones.
		{name: "tombstone nil value", key: []byte("d-1"), want: Heartbeat{DeviceID: "d-1", Tombstone: true, AtMs: k}},
		{name: "tombstone empty value", key: []byte("d-1"), value: []byte{}, want: Heartbeat{DeviceID: "d-1", Tombstone: true, AtMs: k}},
		{name: "tombstone format key", key: []byte("d-1"), format: FormatKey, want: Heartbeat{DeviceID: "d-1", Tombstone: true, AtMs: k}},

		// Format key: the value is never looked at.
		{name: "format key garbage", key: []byte("d-1"), value: []byte("\x00not json"), format: FormatKey, want: valid(nil)},
		{name: "format key json ignored", key: []byte("d-1"), value: []byte(`{"ts":1,"class":"sensor","timeout_ms":5000,"device_id":"other"}`), format: FormatKey, want: valid(nil)},
		{name: "format key over max_value_bytes", key: []byte("d-1"), value: bytes.Repeat([]byte("x"), 1<<20), format: FormatKey, want: valid(nil)},
		{name: "format key still checks key", key: []byte{}, value: []byte("x"), format: FormatKey, reason: ReasonNoKey},

		// Valid JSON.
		ok("empty object", `{}`, nil),
		ok("empty object with whitespace", " \t\r\n{ \n } \r\n\t", nil),
		ok("full heartbeat", `{"device_id":"d-1","ts":1763683200000,"class":"sensor","timeout_ms":30000}`, func(h *Heartbeat) {
			h.AtMs, h.Class, h.Timeout = 1763683200000, "sensor", 30*time.Second
		}),
		ok("spec example shape", `{"device_id": "d-1", "ts": "2025-11-21T00:00:00.000Z", "class": "gateway", "timeout_ms": 30000}`, func(h *Heartbeat) {
			h.AtMs, h.Class, h.Timeout, h.Override = 1763683200000, "gateway", 30*time.Second, true
		}),
		ok("ts rfc3339 no fraction", `{"ts":"2025-11-21T00:00:00Z"}`, func(h *Heartbeat) { h.AtMs = 1763683200000 }),
		ok("ts rfc3339 nanoseconds floored", `{"ts":"2025-11-21T00:00:00.123999999Z"}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts rfc3339 one fraction digit", `{"ts":"2025-11-21T00:00:00.1Z"}`, func(h *Heartbeat) { h.AtMs = 1763683200100 }),
		ok("ts rfc3339 offset", `{"ts":"2025-11-21T02:30:00.123+02:30"}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts rfc3339 negative offset", `{"ts":"2025-11-20T23:00:00.400-01:00"}`, func(h *Heartbeat) { h.AtMs = 1763683200400 }),
		ok("ts rfc3339 lowercase t and z", `{"ts":"2025-11-21t00:00:00.2z"}`, func(h *Heartbeat) { h.AtMs = 1763683200200 }),
		ok("ts rfc3339 escaped", `{"ts":"2025-11-21T00:00:00\u002e3Z"}`, func(h *Heartbeat) { h.AtMs = 1763683200300 }),
		ok("ts number fraction floored", `{"ts":1763683200456.999}`, func(h *Heartbeat) { h.AtMs = 1763683200456 }),
		ok("ts number exponent", `{"ts":1.7636832005e12}`, func(h *Heartbeat) { h.AtMs = 1763683200500 }),
		ok("ts at +max_skew", `{"ts":1763683200623}`, func(h *Heartbeat) { h.AtMs = 1763683200623 }),
		ok("ts at -max_skew", `{"ts":1763683199623}`, func(h *Heartbeat) { h.AtMs = 1763683199623 }),
		ok("ts just past +max_skew", `{"ts":1763683200624}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts just past -max_skew", `{"ts":1763683199622}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts far future", `{"ts":"9999-12-31T23:59:59.999Z"}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts far past", `{"ts":"0000-01-01T00:00:00Z"}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts zero", `{"ts":0}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts max int64", `{"ts":9223372036854775807}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts min int64", `{"ts":-9223372036854775808}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts leap second", `{"ts":"2016-12-31T23:59:60Z"}`, func(h *Heartbeat) { h.SkewCorrected = true }),
		ok("ts tiny float", `{"ts":1e-400}`, func(h *Heartbeat) { h.SkewCorrected = true }),

		ok("timeout_ms override", `{"timeout_ms":45000}`, func(h *Heartbeat) { h.Timeout, h.Override = 45*time.Second, true }),
		ok("timeout_ms equals default", `{"timeout_ms":60000}`, nil),
		ok("timeout_ms equals class", `{"class":"sensor","timeout_ms":30000}`, func(h *Heartbeat) { h.Class, h.Timeout = "sensor", 30*time.Second }),
		ok("timeout_ms overrides class", `{"class":"sensor","timeout_ms":60000}`, func(h *Heartbeat) {
			h.Class, h.Timeout, h.Override = "sensor", time.Minute, true
		}),
		ok("timeout_ms exponent integer", `{"timeout_ms":3e4}`, func(h *Heartbeat) { h.Timeout, h.Override = 30*time.Second, true }),
		ok("timeout_ms integral fraction", `{"timeout_ms":2000.000}`, func(h *Heartbeat) { h.Timeout, h.Override = 2*time.Second, true }),
		ok("timeout_ms at min", `{"timeout_ms":1000}`, func(h *Heartbeat) { h.Timeout, h.Override = time.Second, true }),
		ok("timeout_ms at max", `{"timeout_ms":604800000}`, func(h *Heartbeat) { h.Timeout, h.Override = 168*time.Hour, true }),
		ok("timeout_ms below min", `{"timeout_ms":999}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms above max", `{"timeout_ms":604800001}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms zero", `{"timeout_ms":0}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms negative", `{"timeout_ms":-30000}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms huge", `{"timeout_ms":1e300}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms overflows float", `{"timeout_ms":1e999}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms overflows int64", `{"timeout_ms":99999999999999999999999}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms overflows duration", `{"timeout_ms":9223372036854775807}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms non-integer", `{"timeout_ms":30000.5}`, func(h *Heartbeat) { h.TimeoutOutOfRange = true }),
		ok("timeout_ms out of range keeps class", `{"class":"gateway","timeout_ms":-1}`, func(h *Heartbeat) {
			h.Class, h.Timeout, h.TimeoutOutOfRange = "gateway", 5*time.Minute, true
		}),

		ok("class known", `{"class":"gateway"}`, func(h *Heartbeat) { h.Class, h.Timeout = "gateway", 5*time.Minute }),
		ok("class escaped", `{"class":"ger\u00e4t"}`, func(h *Heartbeat) { h.Class, h.Timeout = "gerät", 2*time.Minute }),
		ok("class utf-8", `{"class":"gerät"}`, func(h *Heartbeat) { h.Class, h.Timeout = "gerät", 2*time.Minute }),
		ok("class unknown falls back", `{"class":"toaster"}`, func(h *Heartbeat) { h.UnknownClass = true }),
		ok("class unknown with timeout_ms", `{"class":"toaster","timeout_ms":5000}`, func(h *Heartbeat) {
			h.UnknownClass, h.Timeout, h.Override = true, 5*time.Second, true
		}),
		ok("class case-sensitive", `{"class":"Sensor"}`, func(h *Heartbeat) { h.UnknownClass = true }),
		ok("class empty is no class", `{"class":""}`, nil),
		{name: "class empty strict", key: []byte("d-1"), value: []byte(`{"class":""}`), strict: true, want: valid(nil)},
		{name: "class known strict", key: []byte("d-1"), value: []byte(`{"class":"sensor"}`), strict: true, want: valid(func(h *Heartbeat) {
			h.Class, h.Timeout = "sensor", 30*time.Second
		})},

		ok("nulls are absent", `{"device_id":null,"ts":null,"class":null,"timeout_ms":null}`, nil),
		ok("null overrides earlier value", `{"class":"sensor","class":null}`, nil),
		ok("duplicate last wins", `{"class":"sensor","class":"gateway"}`, func(h *Heartbeat) { h.Class, h.Timeout = "gateway", 5*time.Minute }),
		ok("duplicate wrong type then right", `{"ts":true,"ts":1763683200000}`, func(h *Heartbeat) { h.AtMs = 1763683200000 }),
		ok("duplicate bad ts then good", `{"ts":"nope","ts":1763683200000}`, func(h *Heartbeat) { h.AtMs = 1763683200000 }),
		ok("escaped field name", `{"\u0074s":1763683200000,"cl\u0061ss":"sensor"}`, func(h *Heartbeat) {
			h.AtMs, h.Class, h.Timeout = 1763683200000, "sensor", 30*time.Second
		}),
		ok("field names are case-sensitive", `{"TS":true,"Class":[],"Device_ID":5,"timeout_MS":"x"}`, nil),
		ok("unknown fields of every type", `{"a":1,"b":-2.5e-3,"c":"x","d":true,"e":false,"f":null,"g":[],"h":{},`+
			`"i":[1,"two",{"three":[3,{"}":"]"}]}],"j":{"k":{"l":[null,true,false]}},"device_id":"d-1"}`, nil),
		ok("unknown string with escapes and braces", `{"note":"a \"quoted\" {brace} [bracket] \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00","class":"sensor"}`, func(h *Heartbeat) {
			h.Class, h.Timeout = "sensor", 30*time.Second
		}),
		ok("unknown field named like a known one nested", `{"meta":{"ts":true,"device_id":5,"class":[]}}`, nil),
		ok("unknown field invalid utf-8 tolerated", "{\"note\":\"\xff\xfe\"}", nil),
		ok("nesting at the limit", nested(maxDepth-1), nil),
		ok("whitespace everywhere", " {\n\t\"device_id\" :\r\n \"d-1\" , \"ts\" : 1763683200000 } \n", func(h *Heartbeat) { h.AtMs = 1763683200000 }),

		// device_id.
		ok("device_id equal", `{"device_id":"d-1"}`, nil),
		ok("device_id escaped", `{"device_id":"d\u002d\u0031"}`, nil),
		{name: "device_id escaped slash", key: []byte("site/7"), value: []byte(`{"device_id":"site\/7"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "site/7" })},
		{name: "device_id escaped unicode", key: []byte("gerät-ü"), value: []byte(`{"device_id":"ger\u00e4t-\u00FC"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "gerät-ü" })},
		{name: "device_id surrogate pair", key: []byte("dev-😀"), value: []byte(`{"device_id":"dev-\ud83d\ude00"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "dev-😀" })},
		{name: "device_id raw utf-8", key: []byte("gerät"), value: []byte(`{"device_id":"gerät"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "gerät" })},
		{name: "device_id lone surrogate is U+FFFD", key: []byte("d-\uFFFD"), value: []byte(`{"device_id":"d-\ud800"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "d-\uFFFD" })},
		{name: "device_id invalid utf-8 is U+FFFD", key: []byte("d-\uFFFD"), value: []byte("{\"device_id\":\"d-\xff\"}"), want: valid(func(h *Heartbeat) { h.DeviceID = "d-\uFFFD" })},
		{name: "device_id with backslash in key", key: []byte(`a\nb`), value: []byte(`{"device_id":"a\\nb"}`), want: valid(func(h *Heartbeat) { h.DeviceID = `a\nb` })},
		{name: "key 256 bytes", key: bytes.Repeat([]byte("k"), 256), value: []byte(`{}`), want: valid(func(h *Heartbeat) { h.DeviceID = strings.Repeat("k", 256) })},
		{name: "key 1 byte", key: []byte("k"), value: []byte(`{"device_id":"k"}`), want: valid(func(h *Heartbeat) { h.DeviceID = "k" })},

		// Invalid: the key.
		{name: "missing key", value: []byte(`{}`), reason: ReasonNoKey},
		{name: "empty key", key: []byte{}, value: []byte(`{}`), reason: ReasonNoKey},
		{name: "missing key tombstone", reason: ReasonNoKey},
		{name: "key 257 bytes", key: bytes.Repeat([]byte("k"), 257), value: []byte(`{}`), reason: ReasonKeyTooLong},
		{name: "key 300 bytes", key: bytes.Repeat([]byte("k"), 300), value: []byte(`{}`), reason: ReasonKeyTooLong},
		{name: "key invalid utf-8", key: []byte("d-\xff"), value: []byte(`{}`), reason: ReasonKeyNotUTF8},
		{name: "key surrogate half utf-8", key: []byte("d-\xed\xa0\x80"), value: []byte(`{}`), reason: ReasonKeyNotUTF8},
		{name: "key truncated utf-8", key: []byte("ger\xc3"), value: []byte(`{}`), reason: ReasonKeyNotUTF8},
		{name: "key checked before value", key: []byte("\xff"), value: []byte(`not json`), reason: ReasonKeyNotUTF8},
		{name: "key checked before size", key: bytes.Repeat([]byte("k"), 300), value: bytes.Repeat([]byte(" "), 1<<20), reason: ReasonKeyTooLong},

		// Invalid: size.
		bad("1 MiB value", `{"pad":"`+strings.Repeat("x", 1<<20)+`"}`, ReasonTooLarge),
		bad("one byte over", `{"pad":"`+strings.Repeat("x", 64<<10-9)+`"}`, ReasonTooLarge),
		ok("exactly max_value_bytes", `{"pad":"`+strings.Repeat("x", 64<<10-10)+`"}`, nil),
		bad("size checked before parsing", strings.Repeat("[", 64<<10+1), ReasonTooLarge),

		// Invalid: not an object.
		bad("not json", `hello`, ReasonNotObject),
		bad("json array", `[{"device_id":"d-1"}]`, ReasonNotObject),
		bad("json null", `null`, ReasonNotObject),
		bad("json string", `"d-1"`, ReasonNotObject),
		bad("json number", `1763683200123`, ReasonNotObject),
		bad("json true", `true`, ReasonNotObject),
		bad("whitespace only", " \n", ReasonNotObject),
		bad("nul byte", "\x00", ReasonNotObject),
		bad("utf-8 bom", "\xef\xbb\xbf{}", ReasonNotObject),
		bad("unterminated object", `{"ts":1`, ReasonNotObject),
		bad("open brace", `{`, ReasonNotObject),
		bad("missing value", `{"a":}`, ReasonNotObject),
		bad("missing colon", `{"a" 1}`, ReasonNotObject),
		bad("trailing comma", `{"a":1,}`, ReasonNotObject),
		bad("leading comma", `{,"a":1}`, ReasonNotObject),
		bad("unquoted name", `{a:1}`, ReasonNotObject),
		bad("single quotes", `{'a':1}`, ReasonNotObject),
		bad("leading zero", `{"ts":0123}`, ReasonNotObject),
		bad("plus sign", `{"ts":+1}`, ReasonNotObject),
		bad("bare minus", `{"ts":-}`, ReasonNotObject),
		bad("dot without digits", `{"ts":1.}`, ReasonNotObject),
		bad("exponent without digits", `{"ts":1e}`, ReasonNotObject),
		bad("nan", `{"ts":NaN}`, ReasonNotObject),
		bad("infinity", `{"ts":Infinity}`, ReasonNotObject),
		bad("bad literal", `{"a":tru}`, ReasonNotObject),
		bad("bad escape", `{"a":"\x"}`, ReasonNotObject),
		bad("short unicode escape", `{"a":"\u12"}`, ReasonNotObject),
		bad("control char in string", "{\"a\":\"x\ty\"}", ReasonNotObject),
		bad("unterminated string", `{"a":"x}`, ReasonNotObject),
		bad("mismatched brackets", `{"a":[}`, ReasonNotObject),
		bad("mismatched braces", `{"a":{]}`, ReasonNotObject),
		bad("array missing comma", `{"a":[1 2]}`, ReasonNotObject),
		bad("array trailing comma", `{"a":[1,]}`, ReasonNotObject),
		bad("nested object bad name", `{"a":{1:2}}`, ReasonNotObject),
		bad("nesting past the limit", nested(maxDepth), ReasonNotObject),
		bad("10000-deep nesting", nested(10000), ReasonNotObject),
		bad("10000-deep objects", `{"x":`+strings.Repeat(`{"y":`, 10000)+`1`+strings.Repeat("}", 10000)+`}`, ReasonNotObject),
		bad("syntax error wins over bad_type", `{"ts":true,`, ReasonNotObject),

		// Invalid: trailing data.
		bad("trailing garbage", `{} x`, ReasonTrailingData),
		bad("two objects", `{"ts":1}{"ts":2}`, ReasonTrailingData),
		bad("extra brace", `{}}`, ReasonTrailingData),
		bad("trailing nul", "{}\x00", ReasonTrailingData),
		bad("trailing data wins over bad_type", `{"ts":true} 1`, ReasonTrailingData),

		// Invalid: wrong types.
		bad("device_id number", `{"device_id":5}`, ReasonBadType),
		bad("device_id bool", `{"device_id":true}`, ReasonBadType),
		bad("device_id object", `{"device_id":{"id":"d-1"}}`, ReasonBadType),
		bad("ts bool", `{"ts":true}`, ReasonBadType),
		bad("ts false", `{"ts":false}`, ReasonBadType),
		bad("ts array", `{"ts":[1763683200123]}`, ReasonBadType),
		bad("ts object", `{"ts":{}}`, ReasonBadType),
		bad("class array", `{"class":[]}`, ReasonBadType),
		bad("class number", `{"class":7}`, ReasonBadType),
		bad("class bool", `{"class":false}`, ReasonBadType),
		bad("timeout_ms string", `{"timeout_ms":"30000"}`, ReasonBadType),
		bad("timeout_ms bool", `{"timeout_ms":true}`, ReasonBadType),
		bad("timeout_ms object", `{"timeout_ms":{"ms":30000}}`, ReasonBadType),
		bad("duplicate right type then wrong", `{"ts":1763683200000,"ts":true}`, ReasonBadType),
		bad("bad_type wins over bad_ts", `{"ts":"nope","class":1}`, ReasonBadType),

		// Invalid: bad ts.
		bad("ts unparseable string", `{"ts":"yesterday"}`, ReasonBadTS),
		bad("ts empty string", `{"ts":""}`, ReasonBadTS),
		ok("ts numeric string", `{"ts":"1763683200123"}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts seconds", `{"ts":1763683200}`, func(h *Heartbeat) { h.AtMs = 1763683200000 }),
		ok("ts seconds fraction", `{"ts":1763683200.1239}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts seconds string", `{"ts":"1763683200.4"}`, func(h *Heartbeat) { h.AtMs = 1763683200400 }),
		ok("ts microseconds", `{"ts":1763683200123999}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts nanoseconds", `{"ts":1763683200123999999}`, func(h *Heartbeat) { h.AtMs = 1763683200123 }),
		ok("ts nanoseconds exponent", `{"ts":1.7636832004e18}`, func(h *Heartbeat) { h.AtMs = 1763683200400 }),
		bad("ts numeric string with space", `{"ts":"1763683200123 "}`, ReasonBadTS),
		bad("ts numeric string plus", `{"ts":"+1763683200123"}`, ReasonBadTS),
		bad("ts date only", `{"ts":"2025-11-21"}`, ReasonBadTS),
		bad("ts no zone", `{"ts":"2025-11-21T00:00:00"}`, ReasonBadTS),
		bad("ts space separator", `{"ts":"2025-11-21 00:00:00Z"}`, ReasonBadTS),
		bad("ts month 13", `{"ts":"2025-13-21T00:00:00Z"}`, ReasonBadTS),
		bad("ts feb 29 non-leap", `{"ts":"2025-02-29T00:00:00Z"}`, ReasonBadTS),
		bad("ts hour 24", `{"ts":"2025-11-21T24:00:00Z"}`, ReasonBadTS),
		bad("ts second 61", `{"ts":"2025-11-21T00:00:61Z"}`, ReasonBadTS),
		bad("ts one-digit hour", `{"ts":"2025-11-21T1:00:00Z"}`, ReasonBadTS),
		bad("ts comma fraction", `{"ts":"2025-11-21T00:00:00,123Z"}`, ReasonBadTS),
		bad("ts empty fraction", `{"ts":"2025-11-21T00:00:00.Z"}`, ReasonBadTS),
		bad("ts offset hour 24", `{"ts":"2025-11-21T00:00:00+24:00"}`, ReasonBadTS),
		bad("ts offset without colon", `{"ts":"2025-11-21T00:00:00+0200"}`, ReasonBadTS),
		bad("ts five-digit year", `{"ts":"12025-11-21T00:00:00Z"}`, ReasonBadTS),
		bad("ts trailing space", `{"ts":"2025-11-21T00:00:00Z "}`, ReasonBadTS),
		bad("ts over int64", `{"ts":9223372036854775808}`, ReasonBadTS),
		bad("ts under int64", `{"ts":-9223372036854775809}`, ReasonBadTS),
		bad("ts float over int64", `{"ts":9.3e30}`, ReasonBadTS),
		bad("ts float overflow", `{"ts":1e400}`, ReasonBadTS),
		bad("ts negative overflow", `{"ts":-1e400}`, ReasonBadTS),
		bad("bad_ts wins over id_mismatch", `{"ts":"nope","device_id":"d-2"}`, ReasonBadTS),

		// Invalid: id mismatch.
		bad("device_id differs", `{"device_id":"d-2"}`, ReasonIDMismatch),
		bad("device_id case differs", `{"device_id":"D-1"}`, ReasonIDMismatch),
		bad("device_id trailing space", `{"device_id":"d-1 "}`, ReasonIDMismatch),
		bad("device_id empty", `{"device_id":""}`, ReasonIDMismatch),
		bad("device_id prefix", `{"device_id":"d-"}`, ReasonIDMismatch),
		bad("device_id escaped differs", `{"device_id":"d-\u0032"}`, ReasonIDMismatch),
		bad("device_id duplicate last wins", `{"device_id":"d-1","device_id":"d-2"}`, ReasonIDMismatch),
		bad("device_id invalid utf-8 vs ascii key", "{\"device_id\":\"d-\xff\"}", ReasonIDMismatch),
		{name: "device_id escape is not the key's backslash", key: []byte(`a\nb`), value: []byte(`{"device_id":"a\nb"}`), reason: ReasonIDMismatch},
		{name: "id_mismatch wins over unknown_class", key: []byte("d-1"), value: []byte(`{"device_id":"d-2","class":"toaster"}`), strict: true, reason: ReasonIDMismatch},

		// Invalid: unknown class (strict).
		{name: "class unknown strict", key: []byte("d-1"), value: []byte(`{"class":"toaster"}`), strict: true, reason: ReasonUnknownClass},
		{name: "class unknown strict with timeout_ms", key: []byte("d-1"), value: []byte(`{"class":"toaster","timeout_ms":5000}`), strict: true, reason: ReasonUnknownClass},
	}
	return cases
}()

func TestDecodeTable(t *testing.T) {
	t.Parallel()
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var hb Heartbeat
			reason, ok := c.decoder().decodeKV(c.key, c.value, c.kafkaTime(), &hb)
			if c.reason != "" {
				if ok || reason != c.reason {
					t.Fatalf("Decode = (%q, %v), want (%q, false)", reason, ok, c.reason)
				}
				return
			}
			if !ok || reason != "" {
				t.Fatalf("Decode = (%q, %v), want valid", reason, ok)
			}
			if plain(hb) != c.want {
				t.Fatalf("heartbeat\n got %+v\nwant %+v", hb, c.want)
			}
		})
	}
}

// TestDecodeCoversEveryReason keeps the table honest: every reason code
// appears, and AllReasons lists each exactly once.
func TestDecodeCoversEveryReason(t *testing.T) {
	t.Parallel()
	seen := map[Reason]bool{}
	for _, c := range decodeCases {
		if c.reason != "" {
			seen[c.reason] = true
		}
	}
	for _, c := range shapeCases {
		if c.reason != "" {
			seen[c.reason] = true
		}
	}
	for _, r := range avroReasons {
		seen[r] = true
	}
	if len(AllReasons) != 13 {
		t.Errorf("AllReasons has %d reasons, the README lists 13", len(AllReasons))
	}
	all := map[Reason]bool{}
	for _, r := range AllReasons {
		if all[r] {
			t.Errorf("AllReasons lists %q twice", r)
		}
		all[r] = true
		if !seen[r] {
			t.Errorf("no table case for reason %q", r)
		}
	}
	for r := range seen {
		if !all[r] {
			t.Errorf("reason %q is not in AllReasons", r)
		}
	}
}

// TestDecodeCoversEveryFallback checks the table exercises each fallback.
func TestDecodeCoversEveryFallback(t *testing.T) {
	t.Parallel()
	var skew, timeout, class, override, tomb bool
	for _, c := range decodeCases {
		if c.reason != "" {
			continue
		}
		skew = skew || c.want.SkewCorrected
		timeout = timeout || c.want.TimeoutOutOfRange
		class = class || c.want.UnknownClass
		override = override || c.want.Override
		tomb = tomb || c.want.Tombstone
	}
	if !skew || !timeout || !class || !override || !tomb {
		t.Fatalf("missing fallback case: skew %v timeout %v class %v override %v tombstone %v", skew, timeout, class, override, tomb)
	}
}

// TestDecodeReusesHeartbeat checks that a reused Heartbeat carries nothing
// over from the previous message and keeps an equal DeviceID string.
func TestDecodeReusesHeartbeat(t *testing.T) { // not parallel: AllocsPerRun
	d := mustNewDecoder(testConfig())
	kt := time.UnixMilli(testKafkaMs)
	var hb Heartbeat
	if _, ok := d.decodeKV([]byte("d-1"), []byte(`{"ts":1,"class":"toaster","timeout_ms":5}`), kt, &hb); !ok {
		t.Fatal("first message invalid")
	}
	if !hb.SkewCorrected || !hb.UnknownClass || !hb.TimeoutOutOfRange {
		t.Fatalf("first message: %+v", hb)
	}
	if _, ok := d.decodeKV([]byte("d-1"), []byte(`{}`), kt, &hb); !ok {
		t.Fatal("second message invalid")
	}
	if want := valid(nil); plain(hb) != want {
		t.Fatalf("second message: got %+v, want %+v", hb, want)
	}
	if _, ok := d.decodeKV([]byte("d-2"), nil, kt, &hb); !ok || hb.DeviceID != "d-2" || !hb.Tombstone {
		t.Fatalf("third message: %+v", hb)
	}

	key := []byte("d-3")
	allocs := testing.AllocsPerRun(100, func() {
		d.decodeKV(key, []byte(`{"device_id":"d-3","ts":1763683200000,"class":"sensor","timeout_ms":45000}`), kt, &hb)
	})
	if allocs != 0 {
		t.Errorf("valid heartbeat with the same key: %v allocs, want 0", allocs)
	}
	// The DeviceID must not alias the caller's buffer, which Kafka clients reuse.
	key[2] = '9'
	if hb.DeviceID != "d-3" {
		t.Errorf("DeviceID aliases the key buffer: %q", hb.DeviceID)
	}
}

func TestDecodeMaxSkew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		skew    time.Duration
		ts      int64
		correct bool
	}{
		{0, testKafkaMs, false},
		{0, testKafkaMs + 1, true},
		{-time.Second, testKafkaMs, false},
		{1500 * time.Microsecond, testKafkaMs + 1, false},
		{1500 * time.Microsecond, testKafkaMs - 2, true},
		{time.Duration(math.MaxInt64), math.MinInt64, true}, // 292 years
		{time.Duration(math.MaxInt64), 0, false},
	} {
		cfg := testConfig()
		cfg.MaxSkew = tc.skew
		var hb Heartbeat
		value := fmt.Appendf(nil, `{"ts":%d}`, tc.ts)
		if _, ok := mustNewDecoder(cfg).decodeKV([]byte("d-1"), value, time.UnixMilli(testKafkaMs), &hb); !ok {
			t.Fatalf("skew %v ts %d: invalid", tc.skew, tc.ts)
		}
		if hb.SkewCorrected != tc.correct {
			t.Errorf("skew %v ts %d: SkewCorrected = %v, want %v", tc.skew, tc.ts, hb.SkewCorrected, tc.correct)
		}
	}
}

func TestDecoderDefaults(t *testing.T) {
	t.Parallel()
	d := mustNewDecoder(Config{Timeouts: timeouts.DefaultConfig()})
	var hb Heartbeat
	kt := time.UnixMilli(testKafkaMs)
	if _, ok := d.decodeKV([]byte("d-1"), []byte(`{"class":"sensor"}`), kt, &hb); !ok || hb.Timeout != time.Minute || !hb.UnknownClass {
		t.Fatalf("default format: %+v", hb)
	}
	big := []byte(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	if r, _ := d.decodeKV([]byte("d-1"), big, kt, &hb); r != ReasonTooLarge {
		t.Fatalf("default max_value_bytes: reason %q, want too_large", r)
	}
}

func TestReasonStrings(t *testing.T) {
	t.Parallel()
	want := []string{"not_object", "trailing_data", "bad_type", "bad_ts", "no_key", "key_too_long", "key_not_utf8", "id_mismatch", "too_large", "unknown_class", "no_device_id", "bad_payload", "unknown_schema"}
	got := make([]string, len(AllReasons))
	for i, r := range AllReasons {
		got[i] = string(r)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AllReasons = %v, want %v", got, want)
	}
}

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// TestDecodeDifferential checks Decode against encoding/json on random,
// partly corrupted heartbeats: whenever encoding/json rejects a value Decode
// must reject it as not_object or trailing_data, and whenever it accepts an
// object Decode must agree on the verdict and on every field.
func TestDecodeDifferential(t *testing.T) {
	t.Parallel()
	n := 30000
	if testing.Short() {
		n = 5000
	}
	r := newRand(t)
	keys := []string{"d-1", "gerät-ü", "dev/😀", `a\"b`, "d-\uFFFD", "x"}
	outcomes := map[Reason]int{}
	lax, strict := testConfig(), testConfig()
	strict.Timeouts.StrictClasses = true
	decoders := map[bool]*Decoder{false: mustNewDecoder(lax), true: mustNewDecoder(strict)}
	for i := 0; i < n; i++ {
		cfg := lax
		if r.IntN(4) == 0 {
			cfg = strict
		}
		key := keys[r.IntN(len(keys))]
		value := genHeartbeat(r, key)
		if r.IntN(3) == 0 {
			value = mutate(r, value)
		}
		if len(value) == 0 {
			continue
		}
		var got Heartbeat
		kafkaMs := testKafkaMs
		reason, ok := decoders[cfg.Timeouts.StrictClasses].decodeKV([]byte(key), value, time.UnixMilli(kafkaMs), &got)
		want, wantReason, skip := referenceDecode(cfg, key, value, kafkaMs)
		if skip {
			continue
		}
		if reason != wantReason || ok != (wantReason == "") {
			t.Fatalf("key %q value %q (strict %v):\nDecode = (%q, %v), encoding/json says %q", key, value, cfg.Timeouts.StrictClasses, reason, ok, wantReason)
		}
		if ok && plain(got) != want {
			t.Fatalf("key %q value %q (strict %v):\n got %+v\nwant %+v", key, value, cfg.Timeouts.StrictClasses, got, want)
		}
		outcomes[reason]++
	}
	t.Logf("outcomes (\"\" = valid): %v", outcomes)
}

// referenceDecode is the README's "Messages" written with encoding/json, time and strconv.
// skip is set for the few inputs where Decode knowingly parts from them (a
// leap second, which time rejects).
func referenceDecode(cfg Config, key string, value []byte, kafkaMs int64) (hb Heartbeat, reason Reason, skip bool) {
	if !json.Valid(value) {
		var first json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(value)).Decode(&first); err == nil && first[0] == '{' && jsonDepth(first) <= maxDepth {
			return hb, ReasonTrailingData, false
		}
		return hb, ReasonNotObject, false
	}
	if bytes.TrimLeft(value, " \t\r\n")[0] != '{' || jsonDepth(value) > maxDepth {
		return hb, ReasonNotObject, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(value, &m); err != nil {
		panic(fmt.Sprintf("valid JSON object %q does not unmarshal: %v", value, err))
	}
	typ := func(name string) byte { // 0 absent, 's' string, 'n' number, 'x' other
		raw, ok := m[name]
		switch {
		case !ok || string(raw) == "null":
			return 0
		case raw[0] == '"':
			return 's'
		case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
			return 'n'
		}
		return 'x'
	}
	str := func(name string) string {
		var s string
		if err := json.Unmarshal(m[name], &s); err != nil {
			panic(err)
		}
		return s
	}
	idT, tsT, classT, tmoT, parentT := typ("device_id"), typ("ts"), typ("class"), typ("timeout_ms"), typ("parent")
	if idT == 'n' || idT == 'x' || tsT == 'x' || classT == 'n' || classT == 'x' || tmoT == 's' || tmoT == 'x' || parentT == 'n' || parentT == 'x' {
		return hb, ReasonBadType, false
	}
	hb = Heartbeat{DeviceID: key, AtMs: kafkaMs, Timeout: cfg.Timeouts.Default}
	if tsT != 0 {
		var ms int64
		var err error
		if tsT == 's' {
			ms, err, skip = refRFC3339(str("ts"))
			if err != nil && refNumberRe.MatchString(str("ts")) {
				ms, err = refTSNumber(str("ts"))
			}
		} else {
			ms, err = refTSNumber(string(m["ts"]))
		}
		if skip {
			return hb, "", true
		}
		if err != nil {
			return hb, ReasonBadTS, false
		}
		if d := ms - kafkaMs; d >= -cfg.MaxSkew.Milliseconds() && d <= cfg.MaxSkew.Milliseconds() {
			hb.AtMs = ms
		} else {
			hb.SkewCorrected = true
		}
	}
	if idT == 's' && str("device_id") != key {
		return hb, ReasonIDMismatch, false
	}
	if classT == 's' {
		if c := str("class"); c != "" {
			if d, ok := cfg.Timeouts.Classes[c]; ok {
				hb.Class, hb.Timeout = c, d
			} else if cfg.Timeouts.StrictClasses {
				return hb, ReasonUnknownClass, false
			} else {
				hb.UnknownClass = true
			}
		}
	}
	if tmoT == 'n' {
		ms, ok := refTimeoutMs(string(m["timeout_ms"]))
		if ok && ms >= cfg.Timeouts.Min.Milliseconds() && ms <= cfg.Timeouts.Max.Milliseconds() {
			hb.Override = time.Duration(ms)*time.Millisecond != hb.Timeout
			hb.Timeout = time.Duration(ms) * time.Millisecond
		} else {
			hb.TimeoutOutOfRange = true
		}
	}
	if parentT == 's' {
		p := str("parent")
		if len(p) > MaxKeyBytes {
			return hb, ReasonBadType, false
		}
		hb.HasParent = true
		if p == key {
			hb.SelfParent = true
		} else {
			hb.Parent = p
		}
	}
	return hb, "", false
}

func jsonDepth(v []byte) int {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber() // 1e400 is valid JSON but no float64
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return most
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			most = max(most, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

var rfc3339Re = regexp.MustCompile(`^\d{4}-\d\d-\d\d[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))$`)

func refRFC3339(s string) (ms int64, err error, skip bool) {
	g := rfc3339Re.FindStringSubmatch(s)
	if g == nil {
		return 0, errors.New("not RFC 3339"), false
	}
	if g[3] == "60" {
		return 0, nil, true
	}
	if g[6] != "" && (g[6] > "23" || g[7] > "59") {
		return 0, errors.New("offset out of range"), false
	}
	t, err := time.Parse(time.RFC3339, strings.ToUpper(s))
	return t.UnixMilli(), err, false
}

var refNumberRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// refTSNumber reads a numeric time by its magnitude (the README's "Real
// sources"): exactly with math/big, except that a number with an exponent,
// or an integer part over 18 digits, goes through float64, as Decode does.
func refTSNumber(n string) (int64, error) {
	intPart := strings.TrimPrefix(n, "-")
	if i := strings.IndexAny(intPart, ".eE"); i >= 0 {
		intPart = intPart[:i]
	}
	if strings.ContainsAny(n, "eE") || (strings.Contains(n, ".") && len(intPart) > 18) {
		x, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, err
		}
		switch a := math.Abs(x); {
		case a < 1e11:
			x *= 1000
		case a < 1e14:
		case a < 1e17:
			x /= 1000
		default:
			x /= 1e6
		}
		x = math.Trunc(x)
		if x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, errors.New("out of int64 range")
		}
		return int64(x), nil
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return 0, errors.New("not a number")
	}
	if !strings.Contains(n, ".") {
		if _, err := strconv.ParseInt(n, 10, 64); err != nil {
			return 0, err
		}
	}
	abs := new(big.Rat).Abs(r)
	scale := new(big.Rat)
	switch {
	case abs.Cmp(big.NewRat(1e11, 1)) < 0:
		scale.SetInt64(1000)
	case abs.Cmp(big.NewRat(1e14, 1)) < 0:
		scale.SetInt64(1)
	case abs.Cmp(big.NewRat(1e17, 1)) < 0:
		scale.SetFrac64(1, 1000)
	default:
		scale.SetFrac64(1, 1e6)
	}
	r.Mul(r, scale)
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if !q.IsInt64() {
		return 0, errors.New("out of int64 range")
	}
	return q.Int64(), nil
}

func refTimeoutMs(n string) (int64, bool) {
	if !strings.ContainsAny(n, ".eE") {
		ms, err := strconv.ParseInt(n, 10, 64)
		return ms, err == nil
	}
	x, err := strconv.ParseFloat(n, 64)
	if err != nil || x != math.Trunc(x) || x < -1e15 || x > 1e15 {
		return -1, false
	}
	return int64(x), true
}

// genHeartbeat returns a random JSON object in the shape of a heartbeat:
// known fields (sometimes of the wrong type, sometimes escaped, repeated or
// null) among unknown ones.
func genHeartbeat(r *rand.Rand, key string) []byte {
	var b strings.Builder
	b.WriteString(ws(r))
	b.WriteByte('{')
	n := r.IntN(7)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ws(r))
		var name, value string
		switch r.IntN(7) {
		case 0:
			name, value = "device_id", genDeviceID(r, key)
		case 4:
			name, value = "parent", genDeviceID(r, key)
		case 1:
			name, value = "ts", genTS(r)
		case 2:
			name, value = "class", genClass(r)
		case 3:
			name, value = "timeout_ms", genTimeout(r)
		default:
			name, value = []string{"meta", "TS", "Class", "seq", "device", "timeout"}[r.IntN(6)], genValue(r, 0)
		}
		b.WriteString(jsonString(r, name))
		b.WriteString(ws(r))
		b.WriteByte(':')
		b.WriteString(ws(r))
		b.WriteString(value)
		b.WriteString(ws(r))
	}
	b.WriteByte('}')
	b.WriteString(ws(r))
	return []byte(b.String())
}

func ws(r *rand.Rand) string {
	return []string{"", "", "", " ", "\n\t", "\r\n  "}[r.IntN(6)]
}

// wrongType returns a JSON value that is neither a string nor a number.
func wrongType(r *rand.Rand) string {
	return []string{"true", "false", "null", "null", "[]", "{}", `[1,"a"]`, `{"a":{"b":null}}`}[r.IntN(8)]
}

func genDeviceID(r *rand.Rand, key string) string {
	switch r.IntN(8) {
	case 0:
		return wrongType(r)
	case 1:
		return genNumber(r)
	case 2:
		return jsonString(r, []string{"d-2", "", "D-1", key + " ", "gerät", "d-\xff"}[r.IntN(6)])
	}
	return jsonString(r, key)
}

func genTS(r *rand.Rand) string {
	near := testKafkaMs + r.Int64N(2001) - 1000
	switch r.IntN(10) {
	case 0:
		return wrongType(r)
	case 1:
		return strconv.FormatInt(near, 10)
	case 2:
		return strconv.FormatFloat(float64(near)+r.Float64(), 'f', r.IntN(4), 64)
	case 3:
		return strconv.FormatFloat(float64(near), 'e', -1, 64)
	case 4:
		return genNumber(r)
	case 5:
		return jsonString(r, []string{"", "yesterday", "2025-11-21", "2025-11-21T00:00:00", "2025-02-29T00:00:00Z",
			"2025-11-21T00:00:00.Z", "2025-11-21T24:00:00Z", "2025-11-21T00:00:00+24:00", "2025-11-21T00:00:00,5Z", "1763683200123"}[r.IntN(10)])
	}
	zone := time.FixedZone("", (r.IntN(48)-24)*1800)
	layout := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02t15:04:05.0z07:00"}[r.IntN(4)]
	return jsonString(r, time.UnixMilli(near).In(zone).Format(layout))
}

func genClass(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return wrongType(r)
	case 1:
		return genNumber(r)
	}
	return jsonString(r, []string{"sensor", "gateway", "gerät", "toaster", "", "Sensor"}[r.IntN(6)])
}

func genTimeout(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return wrongType(r)
	case 1:
		return jsonString(r, "30000")
	case 2:
		return genNumber(r)
	}
	return strconv.Itoa([]int{999, 1000, 30000, 60000, 300000, 604800000, 604800001, 0, -1}[r.IntN(9)])
}

func genNumber(r *rand.Rand) string {
	return []string{"0", "-0", "1", "-1", "0.5", "30000.0", "3e4", "3E+4", "1e-400", "1e400", "-1e400",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"9.3e18", "1763683200123.9", "123456789012345678901234567890", "1.5e-3"}[r.IntN(19)]
}

// genValue returns a random JSON value, occasionally nested near or past
// maxDepth.
func genValue(r *rand.Rand, depth int) string {
	if depth == 0 && r.IntN(40) == 0 {
		d := maxDepth - 3 + r.IntN(5)
		return strings.Repeat(`[{"a":`, d/2) + "1" + strings.Repeat("}]", d/2)
	}
	switch k := r.IntN(8); {
	case depth > 3 || k < 3:
		switch r.IntN(3) {
		case 0:
			return genNumber(r)
		case 1:
			return jsonString(r, []string{"", "x", `q"uo\te`, "{[}]", "ü😀", "\x01\x7f", "\xff"}[r.IntN(7)])
		}
		return wrongType(r)
	case k < 5:
		parts := make([]string, r.IntN(4))
		for i := range parts {
			parts[i] = ws(r) + genValue(r, depth+1) + ws(r)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		parts := make([]string, r.IntN(4))
		for i := range parts {
			parts[i] = ws(r) + jsonString(r, []string{"ts", "a", "device_id", ""}[r.IntN(4)]) + ":" + genValue(r, depth+1)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
}

// jsonString quotes s as JSON, escaping some characters that need no
// escape. Control characters are always escaped; invalid UTF-8 is kept raw.
func jsonString(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, w := 0, 0; i < len(s); i += w {
		c, size := utf8.DecodeRuneInString(s[i:])
		w = size
		if c == utf8.RuneError && size == 1 {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case r.IntN(4) == 0 && c >= 0x10000:
			hi, lo := utf16.EncodeRune(c)
			fmt.Fprintf(&b, `\u%04x\u%04X`, hi, lo)
		case r.IntN(4) == 0 || c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// mutate corrupts v a little: a byte deleted, inserted or replaced, the
// tail cut, or something appended.
func mutate(r *rand.Rand, v []byte) []byte {
	const alphabet = "{}[]\",:\\ 0ae-.+\x00\xff\tnul"
	v = slices.Clone(v)
	i := r.IntN(len(v) + 1)
	c := alphabet[r.IntN(len(alphabet))]
	switch r.IntN(5) {
	case 0:
		if i < len(v) {
			v = slices.Delete(v, i, i+1)
		}
	case 1:
		v = slices.Insert(v, i, c)
	case 2:
		if i < len(v) {
			v[i] = c
		}
	case 3:
		v = v[:i]
	default:
		v = append(v, []string{" ", "\n", "x", "{}", "1", "]", "\x00"}[r.IntN(7)]...)
	}
	return v
}

// mustNewDecoder is NewDecoder for configurations known to be valid.
func mustNewDecoder(cfg Config) *Decoder {
	d, err := NewDecoder(cfg)
	if err != nil {
		panic(err)
	}
	return d
}

// decodeKV decodes a message of key and value at kafkaTime, without headers.
func (d *Decoder) decodeKV(key, value []byte, kafkaTime time.Time, hb *Heartbeat) (Reason, bool) {
	return d.Decode(&Message{Key: key, Value: value, Time: kafkaTime}, hb)
}

// plain returns hb without its reused buffers, for comparing.
func plain(hb Heartbeat) Heartbeat {
	hb.bufs = nil
	return hb
}

// TestHeartbeatResetClearsAllButReused checks that reset, which clears the
// Heartbeat field by field, clears every field but the reused ones, so
// that a field added later is not carried from one message to the next.
func TestHeartbeatResetClearsAllButReused(t *testing.T) {
	t.Parallel()
	var hb Heartbeat
	v := reflect.ValueOf(&hb).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int64:
			f.SetInt(5)
		case reflect.Pointer:
			hb.bufs = &buffers{}
		default:
			t.Fatalf("field %s of kind %s: teach this test to set it", v.Type().Field(i).Name, f.Kind())
		}
	}
	bufs := hb.bufs
	hb.reset(7)
	want := Heartbeat{DeviceID: "x", Parent: "x", AtMs: 7, bufs: bufs}
	if hb != want {
		t.Errorf("after reset: %+v, want %+v", hb, want)
	}
}
