package decode

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A single-pass scanner for heartbeat values: parseObject checks that a
// value is exactly one JSON object and locates the members its plan names
// in it, without allocating or building a tree; decode.go applies the
// heartbeat rules to what it found.

// maxDepth bounds the nesting of a heartbeat value, the top-level object
// counting as 1. Deeper values are rejected as not_object. Skipping is
// iterative, so the bound is about refusing abuse, not about the stack.
const maxDepth = 64

// valueKind is the type of a located value, as far as the type checks
// care.
type valueKind uint8

const (
	kindAbsent valueKind = iota // missing or null
	kindString
	kindNumber
	kindOther // true, false, object or array: never a valid field
	kindTime  // a time already in Unix ms (an AMQP timestamp header, an Avro timestamp)
)

// Span flags.
const (
	flagEscape  = 1 << iota // string: has a backslash escape
	flagHigh                // string: has a byte >= 0x80
	flagFrac                // number: has a fraction or an exponent
	flagLiteral             // string: the bytes are the text itself (a header, an Avro string), not JSON
)

// span locates a value in a document: a string's contents without the
// quotes, or a number's text.
type span struct {
	start, end int
	kind       valueKind
	flags      uint8
}

// fields holds the spans of one document's slots (see plan).
type fields [numSlots]span

// A plan names the members of a JSON document to locate: each key either
// fills a slot with its value or, when its value is an object, leads on to
// a plan of its own (the path meta.device.id). The default plan is the
// top-level keys device_id, ts, class, timeout_ms and parent.
type plan struct {
	keys    []planKey
	longest int // the longest key name, which bounds the keys worth unescaping
	// byLen[n] is 1 + the index of the first key of n bytes, or 0: most
	// members are told apart by their length alone, without comparing.
	byLen []uint8
	// first[h] is 1 + the index of the first key matched in place (see
	// match) whose quoted name's second and third bytes hash to h, or 0.
	first [256]uint8
}

type planKey struct {
	name  string
	slots uint16 // the slots this key's value fills, a bit each
	one   int8   // the slot when it fills exactly one (most keys), else -1
	sub   *plan  // the plan inside this key's object, or nil
	next  uint8  // 1 + the index of the next key of the same length, or 0
	// nextFirst is 1 + the index of the next key matched in place of the
	// same hash, or 0.
	nextFirst uint8
	// head and tail are the ends of the quoted name (see ends).
	head, tail uint64
}

// add makes the plan locate path into slot.
func (pl *plan) add(path []string, slot int) {
	k := pl.key(path[0])
	if len(path) == 1 {
		k.slots |= 1 << slot
		k.one = -1
		if bits.OnesCount16(k.slots) == 1 {
			k.one = int8(slot)
		}
		return
	}
	if k.sub == nil {
		k.sub = &plan{}
	}
	k.sub.add(path[1:], slot)
}

func (pl *plan) key(name string) *planKey {
	for i := range pl.keys {
		if pl.keys[i].name == name {
			return &pl.keys[i]
		}
	}
	if len(pl.byLen) <= len(name) {
		pl.byLen = append(pl.byLen, make([]uint8, len(name)+1-len(pl.byLen))...)
	}
	// A plan has a key per slot at most, so an index fits a byte.
	head, tail := ends([]byte(`"` + name + `"`))
	pl.keys = append(pl.keys, planKey{name: name, one: -1, next: pl.byLen[len(name)], head: head, tail: tail})
	pl.byLen[len(name)] = uint8(len(pl.keys))
	if q := `"` + name + `"`; inPlace(name) {
		h := pairHash(q[1], q[2])
		pl.keys[len(pl.keys)-1].nextFirst = pl.first[h]
		pl.first[h] = uint8(len(pl.keys))
	}
	pl.longest = max(pl.longest, len(name))
	return &pl.keys[len(pl.keys)-1]
}

// fill sets the key's slots to sp.
func (k *planKey) fill(f *fields, sp span) {
	if k.one >= 0 {
		f[k.one] = sp
		return
	}
	for s := k.slots; s != 0; s &= s - 1 {
		f[bits.TrailingZeros16(s)] = sp
	}
}

// inPlace reports whether a key name is matched in place: up to 14 bytes
// that a JSON string holds as they are (no quote, backslash, control or
// high byte), so that the quoted name is the whole string wherever it
// stands in a document.
func inPlace(name string) bool {
	if len(name) == 0 || len(name) > 14 {
		return false
	}
	for i := range len(name) {
		if !plainString[name[i]] {
			return false
		}
	}
	return true
}

// pairHash hashes the two bytes after a quoted name's opening quote (the
// second is the closing quote of a name of one byte): names that share a
// first byte, such as ts and timeout_ms, seldom share a hash.
func pairHash(a, b byte) uint8 { return a ^ (b<<3 | b>>5) }

// match returns the key whose quoted name stands at v[i] == '"', as a whole
// string, and the index after it; or nil when no key matched in place
// does. Most members of a heartbeat are found so, without scanning them as
// strings first; the others go through scanString and lookup. The
// candidates are the keys of the hash of the two bytes after the quote.
func (pl *plan) match(v []byte, i int) (*planKey, int) {
	if i+2 >= len(v) { // a quoted name has 3 bytes or more
		return nil, 0
	}
	for j := pl.first[pairHash(v[i+1], v[i+2])]; j != 0; j = pl.keys[j-1].nextFirst {
		k := &pl.keys[j-1]
		if end := i + len(k.name) + 2; end <= len(v) {
			if head, tail := ends(v[i:end]); head == k.head && tail == k.tail {
				return k, end
			}
		}
	}
	return nil, 0
}

// lookup returns the plan's key named by an object key, quoted as in the
// document, or nil.
func (pl *plan) lookup(quoted []byte, flags uint8) *planKey {
	if !plainFlags(flags) && needsUnquote(quoted[1:len(quoted)-1], flags) {
		return pl.lookupEscaped(quoted[1 : len(quoted)-1])
	}
	n := len(quoted) - 2
	if n >= len(pl.byLen) {
		return nil
	}
	i := pl.byLen[n]
	if i == 0 {
		return nil
	}
	if n > 14 {
		for ; i != 0; i = pl.keys[i-1].next {
			if k := &pl.keys[i-1]; string(quoted[1:n+1]) == k.name {
				return k
			}
		}
		return nil
	}
	// Names of the same length are told apart by the two ends of their
	// quoted form, which together cover it: no call to compare bytes.
	head, tail := ends(quoted)
	for ; i != 0; i = pl.keys[i-1].next {
		if k := &pl.keys[i-1]; k.head == head && k.tail == tail {
			return k
		}
	}
	return nil
}

// ends returns the first and the last 8, 4 or 2 bytes of a quoted name of
// 3-16 bytes, as wide as fits; the two overlap or meet, so two names of
// the same length are equal exactly when their ends are.
func ends(q []byte) (head, tail uint64) {
	switch n := len(q); {
	case n >= 8:
		return binary.LittleEndian.Uint64(q), binary.LittleEndian.Uint64(q[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(q)), uint64(binary.LittleEndian.Uint32(q[n-4:]))
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(q)), uint64(binary.LittleEndian.Uint16(q[n-2:]))
	}
	return 0, 0
}

// lookupEscaped returns the plan's key named by an object key's raw
// contents with escapes, or nil.
func (pl *plan) lookupEscaped(raw []byte) *planKey {
	if len(raw) > 6*pl.longest {
		return nil // cannot unescape to a wanted name
	}
	var buf [64]byte
	raw = unquote(buf[:0], raw)
	for i := range pl.keys {
		if string(raw) == pl.keys[i].name {
			return &pl.keys[i]
		}
	}
	return nil
}

// clear empties the slots of the plan and of its sub-plans: a member met
// again replaces what an earlier one of the same name located.
func (pl *plan) clear(f *fields) {
	for i := range pl.keys {
		k := &pl.keys[i]
		k.fill(f, span{})
		if k.sub != nil {
			k.sub.clear(f)
		}
	}
}

// parseObject checks that v is exactly one JSON object (with surrounding
// whitespace) and locates the last occurrence of each member the plan
// names.
func parseObject(v []byte, pl *plan, f *fields) Reason {
	i := skipWS(v, 0)
	if i >= len(v) || v[i] != '{' {
		return ReasonNotObject
	}
	i, r := parseMembers(v, i, 1, pl, f)
	if r != "" {
		return r
	}
	if skipWS(v, i) != len(v) {
		return ReasonTrailingData
	}
	return ""
}

// parseMembers parses the object at v[i] == '{', nested depth levels deep
// (the top level is 1), locating pl's members, and returns the index after
// it.
func parseMembers(v []byte, i, depth int, pl *plan, f *fields) (int, Reason) {
	i = skipWS(v, i+1)
	if i < len(v) && v[i] == '}' {
		return i + 1, ""
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return i, ReasonNotObject
		}
		k, end := pl.match(v, i)
		if k == nil {
			e, kflags, ok := scanString(v, i)
			if !ok {
				return i, ReasonNotObject
			}
			k, end = pl.lookup(v[i:e], kflags), e
		}
		// Compact JSON, the usual, has the colon and the comma right there.
		if i = end; i >= len(v) || v[i] != ':' {
			if i = skipWS(v, i); i >= len(v) || v[i] != ':' {
				return i, ReasonNotObject
			}
		}
		i = skipWS(v, i+1)
		if i >= len(v) {
			return i, ReasonNotObject
		}
		if k != nil && k.sub != nil {
			k.sub.clear(f) // the last member of a name wins, whole
		}
		var sp span
		switch c := v[i]; {
		case c == '"':
			end, fl, ok := scanString(v, i)
			if !ok {
				return i, ReasonNotObject
			}
			sp = span{start: i + 1, end: end - 1, kind: kindString, flags: fl}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end, fl, ok := scanNumber(v, i)
			if !ok {
				return i, ReasonNotObject
			}
			sp = span{start: i, end: end, kind: kindNumber, flags: fl}
			i = end
		case c == '{' && k != nil && k.sub != nil:
			if depth+1 > maxDepth {
				return i, ReasonNotObject
			}
			end, r := parseMembers(v, i, depth+1, k.sub, f)
			if r != "" {
				return end, r
			}
			sp.kind = kindOther
			i = end
		case c == '{' || c == '[':
			end, ok := skipContainer(v, i, depth)
			if !ok {
				return i, ReasonNotObject
			}
			sp.kind = kindOther
			i = end
		default:
			n := literal(v, i)
			if n == 0 {
				return i, ReasonNotObject
			}
			if c != 'n' {
				sp.kind = kindOther
			} // null: absent
			i += n
		}
		if k != nil {
			k.fill(f, sp) // duplicates: the last one wins
		}
		if i >= len(v) || (v[i] != ',' && v[i] != '}') {
			if i = skipWS(v, i); i >= len(v) {
				return i, ReasonNotObject
			}
		}
		if v[i] == ',' {
			i = skipWS(v, i+1)
			continue
		}
		if v[i] == '}' {
			return i + 1, ""
		}
		return i, ReasonNotObject
	}
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

// plainFlags reports from a string's flags alone that its raw contents
// are its value, as most strings' are: no escape, no byte >= 0x80.
// needsUnquote is a call, so hot paths ask plainFlags first.
func plainFlags(flags uint8) bool { return flags&(flagEscape|flagHigh) == 0 }

// needsUnquote reports whether a string's raw contents differ from its
// decoded value.
func needsUnquote(raw []byte, flags uint8) bool {
	if flags&flagLiteral != 0 {
		return false
	}
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
		// Eight bytes at a time while none needs a look (SWAR), straight
		// to the first that does; a byte at a time in the last seven.
		for {
			if i+8 > len(v) {
				for i < len(v) && plainString[v[i]] {
					i++
				}
				break
			}
			if m := specialBytes(binary.LittleEndian.Uint64(v[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
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
	// Eight bytes at a time (a Unix ms time has 13 digits), then one.
	for i+8 <= len(v) {
		if m := nonDigits(binary.LittleEndian.Uint64(v[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

// nonDigits returns a mask with the high bit of each byte of x that is not
// an ASCII digit, and no other bit. After the xor a digit is 0-9; adding
// 0x76 to a byte's low seven bits sets its high bit from 10 up, and cannot
// carry into the next byte.
func nonDigits(x uint64) uint64 {
	const lows, highs = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	t := x ^ asciiZeros
	return ((t & lows) + 0x7676767676767676 | t) & highs
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
	// Eight digits at a time while they cannot overflow (16 digits fit),
	// then one at a time, checked. A Unix ms time has 13 digits.
	i := 0
	for ; i+8 <= len(b) && i < 16; i += 8 {
		d, ok := eightDigits(binary.LittleEndian.Uint64(b[i:]))
		if !ok {
			return 0, false
		}
		n = n*1e8 + d
	}
	if r := len(b) - i; i == 8 && r > 0 {
		// The last r < 8 digits, from the eight bytes that end b with the
		// 8-r read already turned into zeros: 15 digits fit.
		sh := 8 * uint(8-r)
		x := binary.LittleEndian.Uint64(b[len(b)-8:])
		d, ok := eightDigits(x>>sh<<sh | asciiZeros&(1<<sh-1))
		if !ok {
			return 0, false
		}
		n, i = n*pow10[r]+d, len(b)
	}
	for _, c := range b[i:] {
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

// asciiZeros is eight '0' bytes.
const asciiZeros = 0x3030303030303030

var pow10 = [8]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7}

// eightDigits reads eight ASCII digits, the first in the lowest byte of x
// (SWAR), or reports that some byte is not a digit.
func eightDigits(x uint64) (uint64, bool) {
	const highs = 0xf0f0f0f0f0f0f0f0
	// Every high nibble is 3, and no low nibble carries when 6 is added
	// (a carry can only spoil a byte that already fails).
	if x&highs != asciiZeros || (x+0x0606060606060606)&highs != asciiZeros {
		return 0, false
	}
	x &= 0x0f0f0f0f0f0f0f0f
	x = x * (10<<8 + 1) >> 8 // pairs of digits in the low byte of each 16 bits
	x = (x & 0x00ff00ff00ff00ff) * (100<<16 + 1) >> 16
	return (x & 0x0000ffff0000ffff) * (10000<<32 + 1) >> 32, true
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
