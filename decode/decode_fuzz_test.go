package decode

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz flags select the decoder configuration.
const (
	fuzzStrict    = 1 << iota // timeouts.strict_classes
	fuzzFormatKey             // ingest.format: key
)

// FuzzDecode checks that Decode never panics, that a valid result keeps
// the invariants ingest relies on (DeviceID is the key, AtMs is within
// max_skew of the Kafka time or equal to it, Timeout within bounds), and
// that in format json it agrees with the encoding/json reference.
//
// The seed corpus is the table of decode_test.go plus the files under
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases {
		if len(c.value) > 32<<10 {
			continue // huge seeds slow every mutation; too_large needs no fuzzing
		}
		var flags uint8
		if c.strict {
			flags |= fuzzStrict
		}
		if c.format == FormatKey {
			flags |= fuzzFormatKey
		}
		f.Add(c.key, c.value, c.kafkaTime().UnixMilli(), flags)
	}

	decoders := make([]*Decoder, 4)
	for flags := range decoders {
		cfg := testConfig()
		cfg.Timeouts.StrictClasses = flags&fuzzStrict != 0
		if flags&fuzzFormatKey != 0 {
			cfg.Format = FormatKey
		}
		decoders[flags] = mustNewDecoder(cfg)
	}
	base := testConfig()
	skewMs := base.MaxSkew.Milliseconds()

	f.Fuzz(func(t *testing.T, key, value []byte, kafkaMs int64, flags uint8) {
		// Keep the Kafka time where time.Time round-trips Unix ms.
		kafkaMs %= 1 << 50
		flags &= fuzzStrict | fuzzFormatKey
		cfg := testConfig()
		cfg.Timeouts.StrictClasses = flags&fuzzStrict != 0
		formatKey := flags&fuzzFormatKey != 0

		hb := Heartbeat{DeviceID: "stale", Override: true, Class: "stale"}
		reason, ok := decoders[flags].decodeKV(key, value, time.UnixMilli(kafkaMs), &hb)

		if ok != (reason == "") {
			t.Fatalf("Decode = (%q, %v): reason and ok disagree", reason, ok)
		}
		if !ok && !slices.Contains(AllReasons, reason) {
			t.Fatalf("reason %q is not in AllReasons", reason)
		}
		keyOK := len(key) >= 1 && len(key) <= MaxKeyBytes && utf8.Valid(key)
		if !keyOK {
			if ok {
				t.Fatalf("key %q accepted", key)
			}
			return
		}
		if !ok {
			switch reason {
			case ReasonNoKey, ReasonKeyTooLong, ReasonKeyNotUTF8:
				t.Fatalf("valid key %q rejected as %q", key, reason)
			}
		}
		if len(value) == 0 || formatKey {
			want := Heartbeat{DeviceID: string(key), AtMs: kafkaMs, Tombstone: len(value) == 0}
			if !want.Tombstone {
				want.Timeout = base.Timeouts.Default
			}
			if !ok || plain(hb) != want {
				t.Fatalf("Decode = (%q, %v) %+v, want %+v", reason, ok, hb, want)
			}
			return
		}
		if len(value) > base.MaxValueBytes {
			if reason != ReasonTooLarge {
				t.Fatalf("%d-byte value: reason %q, want too_large", len(value), reason)
			}
			return
		}

		if ok {
			if hb.DeviceID != string(key) || hb.Tombstone {
				t.Fatalf("heartbeat %+v for key %q", hb, key)
			}
			if d := hb.AtMs - kafkaMs; hb.AtMs != kafkaMs && (d < -skewMs || d > skewMs) || (hb.SkewCorrected && hb.AtMs != kafkaMs) {
				t.Fatalf("AtMs %d with Kafka time %d and max_skew %dms (SkewCorrected %v)", hb.AtMs, kafkaMs, skewMs, hb.SkewCorrected)
			}
			if hb.Timeout < base.Timeouts.Min || hb.Timeout > base.Timeouts.Max {
				t.Fatalf("Timeout %s out of [%s, %s]", hb.Timeout, base.Timeouts.Min, base.Timeouts.Max)
			}
			if _, known := base.Timeouts.Classes[hb.Class]; hb.Class != "" && !known || hb.Class != "" && hb.UnknownClass {
				t.Fatalf("Class %q with UnknownClass %v", hb.Class, hb.UnknownClass)
			}
			if hb.Override && hb.TimeoutOutOfRange {
				t.Fatalf("both Override and TimeoutOutOfRange: %+v", hb)
			}
			if !json.Valid(value) {
				t.Fatalf("value %q accepted, but it is not JSON", value)
			}
		}

		want, wantReason, skip := referenceDecode(cfg, string(key), value, kafkaMs)
		if skip {
			return
		}
		if reason != wantReason {
			t.Fatalf("value %q: Decode says %q, encoding/json says %q", value, reason, wantReason)
		}
		if ok && plain(hb) != want {
			t.Fatalf("value %q:\n got %+v\nwant %+v", value, hb, want)
		}
	})
}

// fuzzShapes are the shapes FuzzDecodeShapes reads with, by index.
var fuzzShapes = []func(*Config){shapeNative, shapeEMQX5, shapeEMQX4, shapeMQTTTopic, shapeAzure, shapeHeaders, shapeNested}

// FuzzDecodeShapes checks that every shape of the README's "Real sources"
// reads any message without panicking, gives only listed reasons, and that
// a valid result keeps the invariants ingest relies on: a device id of 1-256
// bytes of UTF-8 (but for a deviceless value), a time within max_skew of
// the Kafka time or equal to it, a timeout within bounds, a parent only
// when named.
//
// The seed corpus is the table of shapes_test.go.
func FuzzDecodeShapes(f *testing.F) {
	shapeIndex := func(shape func(*Config)) uint8 {
		for i, s := range fuzzShapes {
			if reflect.ValueOf(s).Pointer() == reflect.ValueOf(shape).Pointer() {
				return uint8(i)
			}
		}
		panic("shape not in fuzzShapes")
	}
	for _, c := range shapeCases {
		f.Add(shapeIndex(c.shape), c.msg.Key, c.msg.Value, c.msg.Headers, testKafkaMs)
	}
	decoders := make([]*Decoder, len(fuzzShapes))
	for i, shape := range fuzzShapes {
		cfg := testConfig()
		shape(&cfg)
		decoders[i] = mustNewDecoder(cfg)
	}
	base := testConfig()
	skewMs := base.MaxSkew.Milliseconds()

	f.Fuzz(func(t *testing.T, shape uint8, key, value, headers []byte, kafkaMs int64) {
		kafkaMs %= 1 << 50
		d := decoders[int(shape)%len(decoders)]
		var hb Heartbeat
		msg := Message{Key: key, Value: value, Headers: headers, Time: time.UnixMilli(kafkaMs)}
		reason, ok := d.Decode(&msg, &hb)
		if ok != (reason == "") {
			t.Fatalf("Decode = (%q, %v): reason and ok disagree", reason, ok)
		}
		if !ok {
			if !slices.Contains(AllReasons, reason) {
				t.Fatalf("reason %q is not in AllReasons", reason)
			}
			return
		}
		if hb.Deviceless {
			if len(value) != 0 {
				t.Fatalf("deviceless heartbeat of a %d-byte value", len(value))
			}
			return
		}
		if n := len(hb.DeviceID); n == 0 || n > MaxKeyBytes || !utf8.ValidString(hb.DeviceID) {
			t.Fatalf("device id %q", hb.DeviceID)
		}
		if hb.Tombstone {
			return
		}
		if d := hb.AtMs - kafkaMs; hb.AtMs != kafkaMs && (d < -skewMs || d > skewMs) {
			t.Fatalf("AtMs %d with Kafka time %d and max_skew %dms", hb.AtMs, kafkaMs, skewMs)
		}
		if hb.Timeout < base.Timeouts.Min || hb.Timeout > base.Timeouts.Max {
			t.Fatalf("Timeout %s out of [%s, %s]", hb.Timeout, base.Timeouts.Min, base.Timeouts.Max)
		}
		if hb.HasParent && (len(hb.Parent) > MaxKeyBytes || hb.Parent == hb.DeviceID || !utf8.ValidString(hb.Parent)) {
			t.Fatalf("parent %q of %q", hb.Parent, hb.DeviceID)
		}
	})
}
