package decode

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/timeouts"
)

// Format is how heartbeat values are read (ingest.format).
type Format string

const (
	// FormatJSON reads a JSON object per message (the README's "Messages").
	FormatJSON Format = "json"
	// FormatKey treats any message as a heartbeat at the Kafka message
	// timestamp: the value is not read.
	FormatKey Format = "key"
	// FormatAvro reads values in the schema-registry wire format.
	FormatAvro Format = "avro"
)

// PayloadEncoding is how an embedded payload is written
// (ingest.payload_encoding).
type PayloadEncoding string

const (
	// PayloadJSON: a JSON document in a JSON string, as EMQX 5's Kafka
	// sink writes payload.
	PayloadJSON PayloadEncoding = "json"
	// PayloadBase64JSON: a base64-encoded JSON document, as EMQX 4 wrote it.
	PayloadBase64JSON PayloadEncoding = "base64-json"
)

// MaxKeyBytes is the longest device id accepted.
const MaxKeyBytes = 256

// Message is what the decoder reads of one Kafka record.
type Message struct {
	// Key and Value are nil when null.
	Key, Value []byte
	// Headers is the record's header section as the record format writes
	// it (see findHeader); nil for none.
	Headers []byte
	// Time is the record's timestamp.
	Time time.Time
}

// Heartbeat is one decoded signal. Decode fills a caller-owned Heartbeat,
// which is meant to be reused across messages.
type Heartbeat struct {
	// DeviceID is the device's id. When the Heartbeat already holds an
	// equal string (the same device as the previous message) it is kept,
	// so no new string is allocated.
	DeviceID string
	// Tombstone is set for a null or empty value whose device id comes
	// from the key or a header: deregister the device. Only DeviceID and
	// AtMs (the Kafka timestamp) are set with it.
	Tombstone bool
	// Deviceless is set for a null or empty value whose device id would
	// come from the value: there is no device to act on, and nothing else
	// is set. Ingest counts it and moves on.
	Deviceless bool
	// AtMs is the heartbeat's time in Unix ms: its time when within
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
	// SkewCorrected is set when the time was further than max_skew from
	// the Kafka timestamp and AtMs fell back to the latter.
	SkewCorrected bool
	// TimeoutOutOfRange is set when timeout_ms was present but not an
	// integer within [timeouts.min, timeouts.max] and Timeout fell back.
	TimeoutOutOfRange bool
	// UnknownClass is set when class named no configured class and the
	// device fell back to no class (Class is then "").
	UnknownClass bool
	// HasParent is set when the heartbeat names its gateway: Parent is it,
	// or "" to remove it. Parent means nothing without HasParent: it keeps
	// the last message's, so that an equal string is not allocated again.
	HasParent bool
	Parent    string
	// SelfParent is set when the device named itself as its parent, which
	// counts as naming none (Parent "").
	SelfParent bool

	// bufs is reused across messages; nil until a message needs it.
	bufs *buffers
}

// buffers hold what a message's fields decode to when they cannot be read
// in place: an unescaped id or parent, a decoded payload.
type buffers struct {
	key, id, payload, base64 []byte
}

// reset clears hb for the next message, keeping what is reused.
func (hb *Heartbeat) reset(kafkaMs int64) {
	// Field by field: a composite literal is built on the stack and moved
	// over hb with a write barrier, every message.
	// TestHeartbeatResetClearsAllButReused checks no field is forgotten.
	hb.Tombstone, hb.Deviceless = false, false
	hb.AtMs, hb.Timeout, hb.Class = kafkaMs, 0, ""
	hb.Override, hb.SkewCorrected, hb.TimeoutOutOfRange, hb.UnknownClass = false, false, false, false
	hb.HasParent, hb.SelfParent = false, false
}

// buf returns hb's buffers.
func (hb *Heartbeat) buf() *buffers {
	if hb.bufs == nil {
		hb.bufs = &buffers{}
	}
	return hb.bufs
}

// intern returns s when it equals b, else a new string of b.
func intern(s string, b []byte) string {
	if s == string(b) {
		return s
	}
	return string(b)
}

// Config configures a Decoder: the parts of the ingest section that say
// what a heartbeat looks like.
type Config struct {
	// Format of values: json, key or avro. Default (""): json.
	Format Format
	// From says where each field comes from. Zero fields take
	// DefaultFrom's.
	From From
	// Payload is "" or value:<path>: the string member of the value that
	// holds the device's own message, for payload:<path> expressions.
	Payload string
	// PayloadEncoding: json or base64-json. Default (""): json.
	PayloadEncoding PayloadEncoding
	// MaxSkew is how far a heartbeat's time may be from the Kafka
	// timestamp before the latter is used. Negative counts as 0.
	MaxSkew time.Duration
	// MaxValueBytes is the largest value accepted (too_large above).
	// Values are not read, hence not limited, in format key.
	// Default (0 or less): 65536.
	MaxValueBytes int
	// Timeouts gives the default, the bounds of timeout_ms, the classes
	// and whether unknown classes are invalid. It should be validated.
	Timeouts timeouts.Config
	// Avro decodes values in format avro; required there.
	Avro *Avro
}

// The slots a document's plan fills (see plan).
const (
	slotID      = iota // the device id, when it comes from the value or payload
	slotIDCheck        // the value's device_id, which must equal the key
	slotTS
	slotClass
	slotTimeout
	slotParent
	slotPayload // the embedded payload's string, in the value
	numSlots
)

// Decoder validates and decodes heartbeats (the README's "Messages" and
// "Real sources"). It holds no mutable state, so one Decoder may serve any
// number of goroutines.
type Decoder struct {
	format   Format
	skewMs   int64
	maxValue int
	def      time.Duration
	min, max time.Duration
	strict   bool
	classes  map[string]classTimeout

	src [numSlots]source // where each slot comes from (srcNone: nowhere)
	// allJSON is set when every field is a member of a JSON value or
	// nothing (the native shape, format json).
	allJSON bool
	base64  bool // the payload is base64-json
	vplan   plan // what to locate in a JSON value
	pplan   plan // what to locate in the payload
	payload bool // some field reads the payload
	avro    *Avro
}

type classTimeout struct {
	name    string
	timeout time.Duration
}

// Validate checks the expressions and the format; errors name the key.
func (c Config) Validate() error {
	_, err := NewDecoder(c)
	return err
}

// NewDecoder returns a Decoder for cfg, or an error naming the key of an
// expression that does not parse or does not fit the format.
func NewDecoder(cfg Config) (*Decoder, error) {
	d := &Decoder{
		format:   cfg.Format,
		skewMs:   int64(cfg.MaxSkew / time.Millisecond),
		maxValue: cfg.MaxValueBytes,
		def:      cfg.Timeouts.Default,
		min:      cfg.Timeouts.Min,
		max:      cfg.Timeouts.Max,
		strict:   cfg.Timeouts.StrictClasses,
		classes:  make(map[string]classTimeout, len(cfg.Timeouts.Classes)),
		avro:     cfg.Avro,
	}
	if d.format == "" {
		d.format = FormatJSON
	}
	switch d.format {
	case FormatJSON, FormatKey, FormatAvro:
	default:
		return nil, fmt.Errorf("ingest.format: want json, key or avro, got %q", d.format)
	}
	if d.skewMs < 0 {
		d.skewMs = 0
	}
	if d.maxValue <= 0 {
		d.maxValue = 64 << 10
	}
	for name, t := range cfg.Timeouts.Classes {
		d.classes[name] = classTimeout{name: name, timeout: t}
	}
	if err := d.parseSources(cfg); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Decoder) parseSources(cfg Config) error {
	from, def := cfg.From, DefaultFrom()
	exprs := []struct {
		slot       int
		f          field
		expr, dflt string
	}{
		{slotID, fieldDeviceID, from.DeviceID, def.DeviceID},
		{slotTS, fieldTS, from.TS, def.TS},
		{slotClass, fieldClass, from.Class, def.Class},
		{slotTimeout, fieldTimeoutMS, from.TimeoutMS, def.TimeoutMS},
		{slotParent, fieldParent, from.Parent, def.Parent},
	}
	if from == (From{}) {
		from = def
		for i := range exprs {
			exprs[i].expr = exprs[i].dflt
		}
	}
	for _, e := range exprs {
		s, err := parseSource(e.f, e.expr)
		if err != nil {
			return err
		}
		if d.format == FormatKey && s.fromValue() {
			if e.expr != e.dflt {
				return fmt.Errorf("ingest.from.%s: %q reads the value, which ingest.format: key does not read; use key, header:<name> or kafka", e.f.name, e.expr)
			}
			s = source{} // the value defaults are inactive under format key
		}
		if d.format == FormatAvro && s.kind == srcValue && len(s.path) == 0 {
			return fmt.Errorf("ingest.from.%s: %q: empty path", e.f.name, e.expr)
		}
		d.src[e.slot] = s
		if s.kind == srcPayload {
			d.payload = true
		}
	}

	switch cfg.PayloadEncoding {
	case "", PayloadJSON:
	case PayloadBase64JSON:
		d.base64 = true
	default:
		return fmt.Errorf("ingest.payload_encoding: want json or base64-json, got %q", cfg.PayloadEncoding)
	}
	if cfg.Payload != "" {
		s, err := parseSource(field{"", []sourceKind{srcValue}}, cfg.Payload)
		if err != nil || d.format == FormatKey {
			return fmt.Errorf("ingest.payload: %q: want \"\" or value:<path> (a string member of the value), and a format that reads the value (json or avro)", cfg.Payload)
		}
		d.src[slotPayload] = s
	}
	if d.payload && cfg.Payload == "" {
		for _, e := range exprs {
			if s := d.src[e.slot]; s.kind == srcPayload {
				return fmt.Errorf("ingest.from.%s: %q needs ingest.payload (the value's member that holds the payload)", e.f.name, e.expr)
			}
		}
	}
	if d.format == FormatAvro && d.avro == nil {
		return fmt.Errorf("ingest.format: avro needs ingest.schema_registry.url")
	}
	d.plan()
	return nil
}

// plan derives from the sources what Decode reads: the value's id check,
// whether the native shape's path applies, and the plans of the value and
// the payload.
func (d *Decoder) plan() {
	// The native shape's device_id must equal the key.
	if d.src[slotID].kind == srcKey && d.format == FormatJSON {
		d.src[slotIDCheck] = source{kind: srcValue, path: []string{"device_id"}}
	}
	d.allJSON = d.format == FormatJSON
	for _, s := range d.src[slotTS:slotPayload] {
		d.allJSON = d.allJSON && (s.kind == srcValue || s.kind == srcNone)
	}
	for slot, s := range d.src {
		switch s.kind {
		case srcValue:
			d.vplan.add(s.path, slot)
		case srcPayload:
			d.pplan.add(s.path, slot)
		}
	}
}

// ReadsHeaders reports whether some expression reads a record header, so
// that a caller copying records keeps their headers only then.
func (d *Decoder) ReadsHeaders() bool {
	for _, s := range d.src {
		if s.kind == srcHeader {
			return true
		}
	}
	return false
}

// found is a field's value as its source gave it. A time of kindTime comes
// apart from it: found is then at most four words, which the compiler keeps
// in registers rather than building and copying in memory.
type found struct {
	raw   []byte // a string's contents (JSON-escaped unless flagLiteral) or a number's text
	kind  valueKind
	flags uint8
}

// Decode validates and decodes one Kafka message into hb. ok=false means
// the message is invalid for the given reason; hb is then only partly
// filled and must not be used. Decode never panics. With the default
// expressions a heartbeat allocates only the DeviceID string, and only
// when hb does not already hold an equal one (a scratch buffer may be
// allocated for odd values: a number over 32 characters, an escaped class
// or ts over 64 bytes).
func (d *Decoder) Decode(m *Message, hb *Heartbeat) (reason Reason, ok bool) {
	kafkaMs := m.Time.UnixMilli()
	// An id from the key or a header is checked first, as the key always was.
	var id []byte
	var r Reason
	if d.src[slotID].kind == srcKey {
		id, r = m.Key, checkID(m.Key, ReasonNoKey) // the native shape's: no call
	} else {
		id, r = d.idOutsideValue(m, hb)
	}
	if r != "" {
		return r, false
	}
	hb.reset(kafkaMs)
	if len(m.Value) == 0 {
		if id == nil {
			hb.Deviceless = true
			return "", true
		}
		hb.DeviceID = intern(hb.DeviceID, id)
		hb.Tombstone = true
		return "", true
	}
	if d.format != FormatKey && len(m.Value) > d.maxValue {
		return ReasonTooLarge, false
	}

	if d.allJSON && !d.payload {
		// The native shape's path: the fields straight from the value's
		// spans, without read's copy of the document or find's dispatch.
		loc := located{value: m.Value}
		if r = parseObject(m.Value, &d.vplan, &loc.vf); r != "" {
			return r, false
		}
		if id == nil {
			if id, r = idInValue(loc.get(slotID), hb); r != "" {
				return r, false
			}
		}
		return d.apply(hb, &loc, id, kafkaMs)
	}
	return d.decodeSources(m, hb, id, kafkaMs)
}

// decodeSources reads the fields of the shapes other than the native one
// through their sources, then applies them.
func (d *Decoder) decodeSources(m *Message, hb *Heartbeat, id []byte, kafkaMs int64) (Reason, bool) {
	// read returns the document rather than filling one through a
	// pointer: a slice stored through a pointer escapes, and would take
	// every message's buffers to the heap with it.
	doc, r := d.read(m, hb)
	if r != "" {
		return r, false
	}
	if id == nil {
		f, _ := doc.find(d, slotID, m, kafkaMs)
		if id, r = idInValue(f, hb); r != "" {
			return r, false
		}
	}
	var f [numSlots]found
	l := located{found: &f}
	f[slotTS], l.tsMs = doc.find(d, slotTS, m, kafkaMs)
	for _, slot := range [...]int{slotClass, slotTimeout, slotParent, slotIDCheck} {
		f[slot], _ = doc.find(d, slot, m, kafkaMs)
	}
	return d.apply(hb, &l, id, kafkaMs)
}

// idOutsideValue returns the device id when it comes from a regex on the
// key or a header (nil when it comes from the value; Decode reads the key
// itself), or why the message is invalid.
func (d *Decoder) idOutsideValue(m *Message, hb *Heartbeat) ([]byte, Reason) {
	idSrc := &d.src[slotID]
	var id []byte
	switch idSrc.kind {
	case srcKeyRegex:
		if seg := idSrc.seg; seg != nil {
			start, end, ok := seg.match(m.Key)
			if !ok {
				return nil, ReasonNoDeviceID
			}
			id = m.Key[start:end]
			break
		}
		// On a copy: regexp keeps its input in pooled state, so the key
		// itself would escape, and with it every Message's buffers.
		b := hb.buf()
		b.key = append(b.key[:0], m.Key...)
		loc := idSrc.re.FindSubmatchIndex(b.key)
		if len(m.Key) == 0 || loc == nil || loc[2] < 0 {
			return nil, ReasonNoDeviceID
		}
		id = b.key[loc[2]:loc[3]]
	case srcHeader:
		v, _ := findHeader(m.Headers, idSrc.header)
		raw, kind, _ := headerValue(v)
		switch kind {
		case kindAbsent:
			return nil, ReasonNoDeviceID
		case kindString:
		default:
			return nil, ReasonBadType
		}
		id = raw
	default:
		return nil, ""
	}
	return id, checkID(id, ReasonNoDeviceID)
}

// idInValue returns the device id found in the value or the payload (f),
// or why the message is invalid.
func idInValue(f found, hb *Heartbeat) ([]byte, Reason) {
	switch f.kind {
	case kindAbsent:
		return nil, ReasonNoDeviceID
	case kindString:
	default:
		return nil, ReasonBadType
	}
	raw := f.raw
	if needsUnquote(raw, f.flags) {
		b := hb.buf()
		b.id = unquote(b.id[:0], raw)
		raw = b.id
	}
	return raw, checkID(raw, ReasonNoDeviceID)
}

// checkID applies the device id rules: 1-256 bytes of UTF-8.
func checkID(id []byte, empty Reason) Reason {
	switch {
	case len(id) == 0:
		return empty
	case len(id) > MaxKeyBytes:
		return ReasonKeyTooLong
	case !validUTF8(id):
		return ReasonKeyNotUTF8
	}
	return ""
}

// validUTF8 is utf8.Valid, answered in a few instructions for ASCII text
// of up to 16 bytes, as most device ids are (two overlapping words of 8 or
// 4 bytes, or a byte loop under 4); utf8.Valid spends about 20 a byte on so
// short a text.
func validUTF8(b []byte) bool {
	const highs = 0x8080808080808080
	switch n := len(b); {
	case n >= 8 && n <= 16:
		if (binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[n-8:]))&highs == 0 {
			return true
		}
	case n >= 4 && n < 8:
		if (binary.LittleEndian.Uint32(b)|binary.LittleEndian.Uint32(b[n-4:]))&0x80808080 == 0 {
			return true
		}
	case n < 4:
		var or byte
		for _, c := range b {
			or |= c
		}
		if or < utf8.RuneSelf {
			return true
		}
	}
	return utf8.Valid(b)
}

// document is what was read of a message's value and payload.
type document struct {
	value, payload []byte // JSON
	vf, pf         fields
	avro           avroRecord
}

// read parses the value (and the payload in it) as far as the plans need.
func (d *Decoder) read(m *Message, hb *Heartbeat) (doc document, r Reason) {
	switch d.format {
	case FormatKey:
		return doc, ""
	case FormatAvro:
		// A copy: handed to the Avro library, the value would escape, and
		// with it every Message's buffers on the native path too.
		if doc.avro, r = d.avro.decodeValue(append([]byte(nil), m.Value...)); r != "" {
			return doc, r
		}
	default:
		doc.value = m.Value
		if r := parseObject(m.Value, &d.vplan, &doc.vf); r != "" {
			return doc, r
		}
	}
	if !d.payload {
		return doc, ""
	}
	f, _ := doc.find(d, slotPayload, m, 0)
	if f.kind != kindString {
		return doc, ReasonBadPayload
	}
	p := f.raw
	b := hb.buf()
	if needsUnquote(p, f.flags) {
		b.payload = unquote(b.payload[:0], p)
		p = b.payload
	}
	if d.base64 {
		enc := base64.StdEncoding
		if len(p)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		b.base64 = append(b.base64[:0], make([]byte, enc.DecodedLen(len(p)))...)
		n, err := enc.Decode(b.base64, p)
		if err != nil {
			return doc, ReasonBadPayload
		}
		p = b.base64[:n]
	}
	doc.payload = p
	if parseObject(p, &d.pplan, &doc.pf) != "" {
		return doc, ReasonBadPayload
	}
	return doc, ""
}

// find returns what the source of slot gives for this message, and the
// time when it is one (kindTime).
func (doc *document) find(d *Decoder, slot int, m *Message, kafkaMs int64) (found, int64) {
	s := &d.src[slot]
	switch s.kind {
	case srcValue:
		if d.format == FormatAvro {
			return doc.avro.find(s.path)
		}
		sp := doc.vf[slot]
		return found{raw: doc.value[sp.start:sp.end], kind: sp.kind, flags: sp.flags}, 0
	case srcPayload:
		sp := doc.pf[slot]
		return found{raw: doc.payload[sp.start:sp.end], kind: sp.kind, flags: sp.flags}, 0
	case srcHeader:
		v, _ := findHeader(m.Headers, s.header)
		raw, kind, ms := headerValue(v)
		return found{raw: raw, kind: kind, flags: flagLiteral}, ms
	case srcKafka:
		return found{kind: kindTime}, kafkaMs
	}
	return found{}, 0
}

// located is what apply reads a message's fields from: on the native
// shape's path the spans of the JSON value, turned into found values only
// where a field is read (an absent one costs a kind check), elsewhere what
// each field's source gave.
type located struct {
	value []byte
	vf    fields
	found *[numSlots]found // nil on the native shape's path
	tsMs  int64            // the time when ts is kindTime (a header, Avro, kafka)
}

// kind is the kind of the value that fills slot.
func (l *located) kind(slot int) valueKind {
	if l.found != nil {
		return l.found[slot].kind
	}
	return l.vf[slot].kind
}

// get is the value that fills slot.
func (l *located) get(slot int) found {
	if l.found != nil {
		return l.found[slot]
	}
	sp := &l.vf[slot]
	return found{raw: l.value[sp.start:sp.end], kind: sp.kind, flags: sp.flags}
}

// apply turns the located fields into hb, checking types and values, in
// the order of the reasons: bad_type, bad_ts, id_mismatch, unknown_class.
func (d *Decoder) apply(hb *Heartbeat, l *located, id []byte, kafkaMs int64) (Reason, bool) {
	ts, class, tmo, parent, check := l.kind(slotTS), l.kind(slotClass), l.kind(slotTimeout), l.kind(slotParent), l.kind(slotIDCheck)
	// A timeout_ms from a header or Avro is text, read as a number.
	textTimeout := tmo == kindString && l.get(slotTimeout).flags&flagLiteral != 0
	if !isKind(check, kindString) ||
		ts == kindOther ||
		!isKind(class, kindString) ||
		!(isKind(tmo, kindNumber) || textTimeout) ||
		!isKind(parent, kindString) {
		return ReasonBadType, false
	}

	if ts != kindAbsent {
		ms, ok := timeOf(l.get(slotTS), l.tsMs)
		if !ok {
			return ReasonBadTS, false
		}
		if withinSkew(ms, kafkaMs, d.skewMs) {
			hb.AtMs = ms
		} else {
			hb.SkewCorrected = true
		}
	}

	if check == kindString {
		if c := l.get(slotIDCheck); !sameString(c.raw, c.flags, id) {
			return ReasonIDMismatch, false
		}
	}
	hb.DeviceID = intern(hb.DeviceID, id)

	base := d.def
	if class == kindString {
		if c := l.get(slotClass); len(c.raw) > 0 {
			if c, ok := d.lookupClass(c.raw, c.flags); ok {
				hb.Class, base = c.name, c.timeout
			} else if d.strict {
				return ReasonUnknownClass, false
			} else {
				hb.UnknownClass = true
			}
		}
	}
	hb.Timeout = base

	if tmo != kindAbsent {
		d.applyTimeout(hb, l.get(slotTimeout), textTimeout, base)
	}
	if parent == kindString {
		return d.applyParent(hb, l.get(slotParent))
	}
	return "", true
}

// applyTimeout sets the device's timeout from a present timeout_ms (text
// when it came from a header or Avro), or flags it out of range.
func (d *Decoder) applyTimeout(hb *Heartbeat, tmo found, text bool, base time.Duration) {
	flags := tmo.flags
	if text {
		flags = numberFlags(tmo.raw)
	}
	t, ok := time.Duration(0), false
	if flags != flagInvalid {
		t, ok = d.timeoutOf(tmo.raw, flags)
	}
	if ok {
		hb.Timeout = t
		hb.Override = t != base
	} else {
		hb.TimeoutOutOfRange = true
	}
}

// isKind reports whether a field's kind is absent or want.
func isKind(k, want valueKind) bool { return k == kindAbsent || k == want }

// applyParent sets the heartbeat's gateway: "" removes it, the device
// itself counts as none.
func (d *Decoder) applyParent(hb *Heartbeat, f found) (Reason, bool) {
	raw := f.raw
	if needsUnquote(raw, f.flags) {
		b := hb.buf()
		b.id = unquote(b.id[:0], raw)
		raw = b.id
	}
	if len(raw) > MaxKeyBytes || !validUTF8(raw) {
		return ReasonBadType, false
	}
	hb.HasParent = true
	if string(raw) == hb.DeviceID {
		hb.SelfParent = true
		raw = nil
	}
	hb.Parent = intern(hb.Parent, raw)
	return "", true
}

// timeOf reads a located time (see times.go).
func timeOf(f found, ms int64) (int64, bool) {
	switch f.kind {
	case kindTime:
		return ms, true
	case kindNumber:
		if f.flags&flagFrac == 0 { // numberMs's integers, the usual time, without its call
			n, ok := parseInt(f.raw)
			return intMs(n), ok
		}
		return numberMs(f.raw, f.flags)
	}
	if plainFlags(f.flags) || !needsUnquote(f.raw, f.flags) {
		return stringMs(f.raw)
	}
	var buf [64]byte
	return stringMs(unquote(buf[:0], f.raw))
}

// flagInvalid marks text that is not a number.
const flagInvalid = 0xff

// numberFlags checks that text is a JSON-syntax number and returns its
// span flags, or flagInvalid.
func numberFlags(text []byte) uint8 {
	if len(text) == 0 || (text[0] != '-' && (text[0] < '0' || text[0] > '9')) {
		return flagInvalid
	}
	end, flags, ok := scanNumber(text, 0)
	if !ok || end != len(text) {
		return flagInvalid
	}
	return flags
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
	if plainFlags(flags) || !needsUnquote(raw, flags) {
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
