package ingest

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/timeouts"
)

// Reason is an invalid-message reason code (SPEC §2), used as the
// flatline-reason dead-letter header and as a metric label.
type Reason string

// The reason codes of SPEC §2. When a message has several faults it gets
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

// maxDepth bounds the nesting of a heartbeat value, the top-level object
// counting as 1. Deeper values are rejected as not_object. Skipping is
// iterative, so the bound is about refusing abuse, not about the stack.
const maxDepth = 64

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

// Decoder validates and decodes heartbeats (SPEC §2). It holds no mutable
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

// parseInt parses a JSON integer (-?digits) exactly, failing on overflow.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxUint64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true // -(1<<63) wraps to itself, as wanted
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// parseFloat parses a syntactically valid JSON number. Overflow to ±Inf is
// a failure; underflow to 0 is not.
func parseFloat(b []byte) (float64, bool) {
	x, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, false
	}
	return x, true
}

// parseRFC3339Ms parses an RFC 3339 date-time with optional fractional
// seconds into Unix ms (the fraction floored to the millisecond). Like Go's
// time.RFC3339 fast path it wants a 4-digit year and a Z or ±hh:mm offset;
// unlike it, it takes the lowercase t and z that RFC 3339 allows and a leap
// second (:60, read as the next second).
func parseRFC3339Ms(s []byte) (int64, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") {
		return 0, false
	}
	if s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 60 {
		return 0, false
	}
	s = s[19:]
	var ms int64
	if s[0] == '.' {
		n := 1
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			if n <= 3 {
				ms = ms*10 + int64(s[n]-'0')
			}
			n++
		}
		if n == 1 {
			return 0, false
		}
		for k := n; k <= 3; k++ {
			ms *= 10
		}
		s = s[n:]
	}
	var offset int64
	switch {
	case len(s) == 1 && (s[0] == 'Z' || s[0] == 'z'):
	case len(s) == len("+07:00") && (s[0] == '+' || s[0] == '-') && s[3] == ':':
		oh, ok1 := digits(s[1:3])
		om, ok2 := digits(s[4:6])
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = (oh*60 + om) * 60
		if s[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + hour*3600 + minute*60 + sec - offset
	return secs*1000 + ms, true
}

func digits(b []byte) (int64, bool) {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func daysIn(month, year int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// The known fields of a heartbeat value.
const (
	fieldDeviceID = iota
	fieldTS
	fieldClass
	fieldTimeoutMS
	numFields
)

// valueKind is the JSON type of a known field's value, as far as the
// type checks care.
type valueKind uint8

const (
	kindAbsent valueKind = iota // missing or null
	kindString
	kindNumber
	kindOther // true, false, object or array: never a valid known field
)

// Span flags.
const (
	flagEscape = 1 << iota // string: has a backslash escape
	flagHigh               // string: has a byte >= 0x80
	flagFrac               // number: has a fraction or an exponent
)

// span locates a known field's value in the message: a string's contents
// without the quotes, or a number's text.
type span struct {
	start, end int
	kind       valueKind
	flags      uint8
}

type fields [numFields]span

// parseObject checks that v is exactly one JSON object (with surrounding
// whitespace) and locates the last occurrence of each known field.
func parseObject(v []byte, f *fields) Reason {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '{' {
		return ReasonNotObject
	}
	i = skipWS(v, i+1)
	if i < len(v) && v[i] == '}' {
		i++
	} else {
		for {
			if i >= len(v) || v[i] != '"' {
				return ReasonNotObject
			}
			end, kflags, ok := scanString(v, i)
			if !ok {
				return ReasonNotObject
			}
			field := lookupField(v[i+1:end-1], kflags)
			i = skipWS(v, end)
			if i >= len(v) || v[i] != ':' {
				return ReasonNotObject
			}
			i = skipWS(v, i+1)
			if i >= len(v) {
				return ReasonNotObject
			}
			var sp span
			switch c := v[i]; {
			case c == '"':
				end, fl, ok := scanString(v, i)
				if !ok {
					return ReasonNotObject
				}
				sp = span{start: i + 1, end: end - 1, kind: kindString, flags: fl}
				i = end
			case c == '-' || (c >= '0' && c <= '9'):
				end, fl, ok := scanNumber(v, i)
				if !ok {
					return ReasonNotObject
				}
				sp = span{start: i, end: end, kind: kindNumber, flags: fl}
				i = end
			case c == '{' || c == '[':
				end, ok := skipContainer(v, i, 1)
				if !ok {
					return ReasonNotObject
				}
				sp.kind = kindOther
				i = end
			default:
				n := literal(v, i)
				if n == 0 {
					return ReasonNotObject
				}
				if c != 'n' {
					sp.kind = kindOther
				} // null: absent
				i += n
			}
			if field >= 0 {
				f[field] = sp // duplicates: the last one wins
			}
			i = skipWS(v, i)
			if i >= len(v) {
				return ReasonNotObject
			}
			if v[i] == ',' {
				i = skipWS(v, i+1)
				continue
			}
			if v[i] == '}' {
				i++
				break
			}
			return ReasonNotObject
		}
	}
	if skipWS(v, i) != len(v) {
		return ReasonTrailingData
	}
	return ""
}

// lookupField returns the known field named by an object key's raw
// contents, or -1.
func lookupField(raw []byte, flags uint8) int {
	if needsUnquote(raw, flags) {
		if len(raw) > 6*len("timeout_ms") {
			return -1 // cannot unescape to a known name
		}
		var buf [64]byte
		raw = unquote(buf[:0], raw)
	}
	switch string(raw) {
	case "device_id":
		return fieldDeviceID
	case "ts":
		return fieldTS
	case "class":
		return fieldClass
	case "timeout_ms":
		return fieldTimeoutMS
	}
	return -1
}

// sameString reports whether a JSON string's raw contents decode to want,
// which is valid UTF-8.
func sameString(raw []byte, flags uint8, want []byte) bool {
	if flags&flagEscape == 0 {
		if string(raw) == string(want) {
			return true
		}
		if flags&flagHigh == 0 {
			return false
		}
		// Invalid UTF-8 decodes to U+FFFD, which want may contain.
	}
	var buf [MaxKeyBytes]byte
	return string(unquote(buf[:0], raw)) == string(want)
}

// needsUnquote reports whether a string's raw contents differ from its
// decoded value.
func needsUnquote(raw []byte, flags uint8) bool {
	return flags&flagEscape != 0 || (flags&flagHigh != 0 && !utf8.Valid(raw))
}

// unquote appends the decoded value of a syntactically valid JSON string's
// raw contents to dst, exactly as encoding/json decodes it: invalid UTF-8
// and unpaired surrogates become U+FFFD.
func unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw):
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw, i)
				if r < 0 {
					return dst // not reached for scanned strings
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						i += 6
						r = dec
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
		}
	}
	return dst
}

func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// plainString marks the bytes that may appear unescaped in a JSON string
// and need no further look: printable ASCII other than '"' and '\\'.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the JSON string starting at v[i] == '"'. It returns the
// index after the closing quote and the string's flags.
func scanString(v []byte, i int) (end int, flags uint8, ok bool) {
	i++
	for {
		// Eight bytes at a time while none needs a look (SWAR).
		for i+8 <= len(v) {
			m := specialBytes(binary.LittleEndian.Uint64(v[i:]))
			if m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for i < len(v) && plainString[v[i]] {
			i++
		}
		if i >= len(v) {
			return i, flags, false
		}
		switch c := v[i]; {
		case c == '"':
			return i + 1, flags, true
		case c == '\\':
			flags |= flagEscape
			if i+1 >= len(v) {
				return i, flags, false
			}
			switch v[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(v, i+2) < 0 {
					return i, flags, false
				}
				i += 6
			default:
				return i, flags, false
			}
		case c < 0x20:
			return i, flags, false
		default: // >= 0x80
			flags |= flagHigh
			i++
		}
	}
}

// specialBytes returns a mask whose lowest set bit is the high bit of the
// first byte of x (in memory order) that is '"', '\\', below 0x20 or
// above 0x7f, or 0 when there is none. Borrows can flag bytes above the
// first special one, never below it.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	m := (x - ones*0x20) &^ x
	m |= (q - ones) &^ q
	m |= (b - ones) &^ b
	return (m | x) & highs
}

// scanNumber scans the JSON number starting at v[i] ('-' or a digit).
func scanNumber(v []byte, i int) (end int, flags uint8, ok bool) {
	if v[i] == '-' {
		i++
	}
	switch {
	case i >= len(v):
		return i, 0, false
	case v[i] == '0':
		i++
	case v[i] >= '1' && v[i] <= '9':
		i = skipDigits(v, i+1)
	default:
		return i, 0, false
	}
	if i < len(v) && v[i] == '.' {
		flags |= flagFrac
		j := skipDigits(v, i+1)
		if j == i+1 {
			return j, flags, false
		}
		i = j
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		flags |= flagFrac
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		j := skipDigits(v, i)
		if j == i {
			return j, flags, false
		}
		i = j
	}
	return i, flags, true
}

func skipDigits(v []byte, i int) int {
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

// literal returns the length of the true, false or null at v[i], or 0.
func literal(v []byte, i int) int {
	rest := v[i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "null", len(rest) >= 4 && string(rest[:4]) == "true":
		return 4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		return 5
	}
	return 0
}

func skipWS(v []byte, i int) int {
	for i < len(v) && v[i] <= ' ' {
		switch v[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipContainer skips the object or array starting at v[i], nested inside
// depth levels, without recursion: a bit per open level (1 = object) is
// enough for maxDepth <= 64.
func skipContainer(v []byte, i, depth int) (int, bool) {
	var objects uint64
	open := 0
	expectValue := true
	for {
		if expectValue {
			if i >= len(v) {
				return i, false
			}
			switch c := v[i]; {
			case c == '{' || c == '[':
				open++
				if depth+open > maxDepth {
					return i, false
				}
				bit := uint64(1) << (open - 1)
				objects &^= bit
				closer := byte(']')
				if c == '{' {
					objects |= bit
					closer = '}'
				}
				i = skipWS(v, i+1)
				if i >= len(v) {
					return i, false
				}
				if v[i] == closer {
					i++
					open--
					if open == 0 {
						return i, true
					}
					expectValue = false
					continue
				}
				if c == '{' {
					var ok bool
					if i, ok = skipMemberName(v, i); !ok {
						return i, false
					}
				}
				continue
			case c == '"':
				end, _, ok := scanString(v, i)
				if !ok {
					return end, false
				}
				i = end
			case c == '-' || (c >= '0' && c <= '9'):
				end, _, ok := scanNumber(v, i)
				if !ok {
					return end, false
				}
				i = end
			default:
				n := literal(v, i)
				if n == 0 {
					return i, false
				}
				i += n
			}
			expectValue = false
			continue
		}
		i = skipWS(v, i)
		if i >= len(v) {
			return i, false
		}
		inObject := objects&(uint64(1)<<(open-1)) != 0
		switch v[i] {
		case ',':
			i = skipWS(v, i+1)
			if inObject {
				var ok bool
				if i, ok = skipMemberName(v, i); !ok {
					return i, false
				}
			}
			expectValue = true
		case '}', ']':
			if (v[i] == '}') != inObject {
				return i, false
			}
			i++
			open--
			if open == 0 {
				return i, true
			}
		default:
			return i, false
		}
	}
}

// skipMemberName skips `"name" :` and the whitespace after it.
func skipMemberName(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return i, false
	}
	end, _, ok := scanString(v, i)
	if !ok {
		return end, false
	}
	i = skipWS(v, end)
	if i >= len(v) || v[i] != ':' {
		return i, false
	}
	return skipWS(v, i+1), true
}
