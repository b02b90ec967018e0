package ingest

import (
	"math"
	"time"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/timeouts"
)

// Reason is an invalid-message reason code (the README's "Messages"), used as the
// flatline-reason dead-letter header and as a metric label.
type Reason string

// The reason codes of the README's "Messages". When a message has several faults it gets
// the first that applies, in this order: the key checks (no_key,
// key_too_long, key_not_utf8), too_large, then not_object, trailing_data,
// bad_type, bad_ts, id_mismatch and unknown_class.
const (
	// ReasonNotObject: not JSON, JSON that is not an object (including
	// null), malformed JSON inside the object, or nesting deeper than 64.
	ReasonNotObject Reason = "not_object"
	// ReasonTrailingData: a valid object followed by more than whitespace.
	ReasonTrailingData Reason = "trailing_data"
	// ReasonBadType: a known field of the wrong JSON type.
	ReasonBadType Reason = "bad_type"
	// ReasonBadTS: a ts string that is not RFC 3339, or a ts number
	// outside the int64 range.
	ReasonBadTS Reason = "bad_ts"
	// ReasonNoKey: a missing or empty Kafka key.
	ReasonNoKey Reason = "no_key"
	// ReasonKeyTooLong: a key over 256 bytes.
	ReasonKeyTooLong Reason = "key_too_long"
	// ReasonKeyNotUTF8: a key that is not valid UTF-8.
	ReasonKeyNotUTF8 Reason = "key_not_utf8"
	// ReasonIDMismatch: device_id differs from the key.
	ReasonIDMismatch Reason = "id_mismatch"
	// ReasonTooLarge: a value over ingest.max_value_bytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonUnknownClass: a class that is not configured, with
	// timeouts.strict_classes.
	ReasonUnknownClass Reason = "unknown_class"
)

// AllReasons lists every reason, for metrics pre-registration and tests.
var AllReasons = []Reason{
	ReasonNotObject, ReasonTrailingData, ReasonBadType, ReasonBadTS,
	ReasonNoKey, ReasonKeyTooLong, ReasonKeyNotUTF8, ReasonIDMismatch,
	ReasonTooLarge, ReasonUnknownClass,
}

// MaxKeyBytes is the longest device id (Kafka key) accepted.
const MaxKeyBytes = 256

// Heartbeat is one decoded signal. Decode fills a caller-owned Heartbeat,
// which is meant to be reused across messages.
type Heartbeat struct {
	// DeviceID is the Kafka key. When the Heartbeat already holds an equal
	// string (the same device as the previous message) it is kept, so no
	// new string is allocated.
	DeviceID string
	// Tombstone is set for a null or empty value: deregister the device.
	// Only DeviceID and AtMs (the Kafka timestamp) are set with it.
	Tombstone bool
	// AtMs is the heartbeat's time in Unix ms: ts when it is within
	// max_skew of the Kafka timestamp, else the Kafka timestamp.
	AtMs int64
	// Timeout is the device's timeout: a valid timeout_ms, else the
	// class's timeout, else timeouts.default.
	Timeout time.Duration
	// Class is the device's class when it is a configured class, else "".
	// It is the configuration's own string, so it costs no allocation.
	Class string
	// Override is set when Timeout came from a valid timeout_ms that
	// differs from what the class or the default would give; the store
	// then keeps it per device.
	Override bool
	// SkewCorrected is set when ts was further than max_skew from the
	// Kafka timestamp and AtMs fell back to the latter.
	SkewCorrected bool
	// TimeoutOutOfRange is set when timeout_ms was present but not an
	// integer within [timeouts.min, timeouts.max] and Timeout fell back.
	TimeoutOutOfRange bool
	// UnknownClass is set when class named no configured class and the
	// device fell back to no class (Class is then "").
	UnknownClass bool
}

// DecoderConfig configures a Decoder.
type DecoderConfig struct {
	// Format of values: json or key. Default (""): json.
	Format Format
	// MaxSkew is how far ts may be from the Kafka timestamp before the
	// latter is used. Negative counts as 0.
	MaxSkew time.Duration
	// MaxValueBytes is the largest json value accepted (too_large above).
	// Values are not parsed, hence not limited, in format key.
	// Default (0 or less): 65536.
	MaxValueBytes int
	// Timeouts gives the default, the bounds of timeout_ms, the classes
	// and whether unknown classes are invalid. It should be validated.
	Timeouts timeouts.Config
}

// Decoder validates and decodes heartbeats (the README's "Messages"). It holds no mutable
// state, so one Decoder may serve any number of goroutines.
type Decoder struct {
	format   Format
	skewMs   int64
	maxValue int
	def      time.Duration
	min, max time.Duration
	strict   bool
	classes  map[string]classTimeout
}

type classTimeout struct {
	name    string
	timeout time.Duration
}

// NewDecoder returns a Decoder for cfg.
func NewDecoder(cfg DecoderConfig) *Decoder {
	d := &Decoder{
		format:   cfg.Format,
		skewMs:   int64(cfg.MaxSkew / time.Millisecond),
		maxValue: cfg.MaxValueBytes,
		def:      cfg.Timeouts.Default,
		min:      cfg.Timeouts.Min,
		max:      cfg.Timeouts.Max,
		strict:   cfg.Timeouts.StrictClasses,
		classes:  make(map[string]classTimeout, len(cfg.Timeouts.Classes)),
	}
	if d.format == "" {
		d.format = FormatJSON
	}
	if d.skewMs < 0 {
		d.skewMs = 0
	}
	if d.maxValue <= 0 {
		d.maxValue = DefaultConfig().MaxValueBytes
	}
	for name, t := range cfg.Timeouts.Classes {
		d.classes[name] = classTimeout{name: name, timeout: t}
	}
	return d
}

// Decode validates and decodes one Kafka message into hb. ok=false means
// the message is invalid for the given reason; hb is then only partly
// filled and must not be used. Decode never panics. For a heartbeat it
// allocates only the DeviceID string, and only when hb does not already
// hold an equal one (a scratch buffer may be allocated for odd values: a
// number over 32 characters, an escaped class or ts over 64 bytes).
func (d *Decoder) Decode(key, value []byte, kafkaTime time.Time, hb *Heartbeat) (reason Reason, ok bool) {
	switch {
	case len(key) == 0:
		return ReasonNoKey, false
	case len(key) > MaxKeyBytes:
		return ReasonKeyTooLong, false
	case !utf8.Valid(key):
		return ReasonKeyNotUTF8, false
	}
	id := hb.DeviceID
	if id != string(key) {
		id = string(key)
	}
	kafkaMs := kafkaTime.UnixMilli()
	*hb = Heartbeat{DeviceID: id, AtMs: kafkaMs}
	if len(value) == 0 {
		hb.Tombstone = true
		return "", true
	}
	if d.format == FormatKey {
		hb.Timeout = d.def
		return "", true
	}
	if len(value) > d.maxValue {
		return ReasonTooLarge, false
	}
	var f fields
	if r := parseObject(value, &f); r != "" {
		return r, false
	}
	return d.apply(key, value, &f, kafkaMs, hb)
}

// apply turns the located fields into hb, checking types and values.
func (d *Decoder) apply(key, v []byte, f *fields, kafkaMs int64, hb *Heartbeat) (Reason, bool) {
	id, ts, class, tmo := &f[fieldDeviceID], &f[fieldTS], &f[fieldClass], &f[fieldTimeoutMS]
	if id.kind == kindNumber || id.kind == kindOther ||
		ts.kind == kindOther ||
		class.kind == kindNumber || class.kind == kindOther ||
		tmo.kind == kindString || tmo.kind == kindOther {
		return ReasonBadType, false
	}

	if ts.kind != kindAbsent {
		ms, ok := parseTS(v[ts.start:ts.end], ts.kind, ts.flags)
		if !ok {
			return ReasonBadTS, false
		}
		if withinSkew(ms, kafkaMs, d.skewMs) {
			hb.AtMs = ms
		} else {
			hb.SkewCorrected = true
		}
	}

	if id.kind == kindString && !sameString(v[id.start:id.end], id.flags, key) {
		return ReasonIDMismatch, false
	}

	base := d.def
	if class.kind == kindString && class.end > class.start {
		if c, ok := d.lookupClass(v[class.start:class.end], class.flags); ok {
			hb.Class, base = c.name, c.timeout
		} else if d.strict {
			return ReasonUnknownClass, false
		} else {
			hb.UnknownClass = true
		}
	}
	hb.Timeout = base

	if tmo.kind == kindNumber {
		if t, ok := d.timeoutOf(v[tmo.start:tmo.end], tmo.flags); ok {
			hb.Timeout = t
			hb.Override = t != base
		} else {
			hb.TimeoutOutOfRange = true
		}
	}
	return "", true
}

// withinSkew reports |ts - kafkaMs| <= skewMs without overflowing.
func withinSkew(ts, kafkaMs, skewMs int64) bool {
	var diff uint64
	if ts >= kafkaMs {
		diff = uint64(ts) - uint64(kafkaMs)
	} else {
		diff = uint64(kafkaMs) - uint64(ts)
	}
	return diff <= uint64(skewMs)
}

func (d *Decoder) lookupClass(raw []byte, flags uint8) (classTimeout, bool) {
	if len(d.classes) == 0 {
		return classTimeout{}, false
	}
	if !needsUnquote(raw, flags) {
		c, ok := d.classes[string(raw)]
		return c, ok
	}
	var buf [64]byte
	c, ok := d.classes[string(unquote(buf[:0], raw))]
	return c, ok
}

// timeoutOf reads timeout_ms: an integer number of milliseconds (in any
// JSON notation, so 3e4 and 30000.0 count) within [min, max].
func (d *Decoder) timeoutOf(num []byte, flags uint8) (time.Duration, bool) {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	var ms int64
	if flags&flagFrac == 0 {
		n, ok := parseInt(num)
		if !ok || n < 0 || n > maxMs {
			return 0, false
		}
		ms = n
	} else {
		x, ok := parseFloat(num)
		if !ok || x != math.Trunc(x) || x < 0 || x > float64(maxMs) {
			return 0, false
		}
		ms = int64(x)
	}
	t := time.Duration(ms) * time.Millisecond
	if t < d.min || t > d.max {
		return 0, false
	}
	return t, true
}

// parseTS reads ts: Unix ms as a JSON number (a fraction is floored), or an
// RFC 3339 string.
func parseTS(raw []byte, kind valueKind, flags uint8) (int64, bool) {
	if kind == kindString {
		if !needsUnquote(raw, flags) {
			return parseRFC3339Ms(raw)
		}
		var buf [64]byte
		return parseRFC3339Ms(unquote(buf[:0], raw))
	}
	if flags&flagFrac == 0 {
		return parseInt(raw)
	}
	x, ok := parseFloat(raw)
	if !ok {
		return 0, false
	}
	x = math.Floor(x)
	// 2^63 is exact in float64; int64 spans [-2^63, 2^63).
	if !(x >= -(1<<63) && x < 1<<63) {
		return 0, false
	}
	return int64(x), true
}
