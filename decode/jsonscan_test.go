package decode

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"testing"
	"unicode/utf8"
)

func TestParseIntEdges(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999999", "", "-", "1a"} {
		got, ok := parseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseInt(%q) = %d, %v; strconv says %d, %v", s, got, ok, want, err)
		}
	}
}

// TestParseIntMatchesStrconv checks the eight-digit steps against strconv on
// numbers of every length, with a non-digit anywhere.
func TestParseIntMatchesStrconv(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	odd := []byte{'/', ':', '-', '+', '.', 'e', ' ', 0x00, 0x80, 0xff, 0x2a, 0x3a, 0x3f, 0x40, 0xf0, 0xfa}
	for n := 0; n < 200000; n++ {
		b := make([]byte, 1+r.IntN(24))
		for i := range b {
			b[i] = '0' + byte(r.IntN(10))
			if r.IntN(4) == 0 {
				b[i] = '9'
			}
		}
		if r.IntN(3) == 0 {
			b[r.IntN(len(b))] = odd[r.IntN(len(odd))]
		}
		if r.IntN(2) == 0 {
			b = append([]byte{'-'}, b...)
		}
		got, ok := parseInt(b)
		want, err := strconv.ParseInt(string(b), 10, 64)
		if b[0] == '+' || (len(b) > 1 && b[0] == '-' && b[1] == '+') {
			err = strconv.ErrSyntax // strconv takes a sign JSON does not
		}
		if ok != (err == nil) || (ok && got != want) {
			t.Fatalf("parseInt(%q) = %d, %v; strconv says %d, %v", b, got, ok, want, err)
		}
	}
}

// TestPlanLookupMatchesNames checks the plan's lookup by length and ends
// against comparing names, on names of 1-20 bytes, some the same length as
// another and a byte apart, looked up plain and escaped.
func TestPlanLookupMatchesNames(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	letters := []string{"a", "b", "_", ".", `"`, `\`, "é"}
	word := func(n int) string {
		w := ""
		for len(w) < n {
			w += letters[r.IntN(len(letters))]
		}
		return w
	}
	// quote writes a name as a JSON string, escaping some of its bytes.
	quote := func(name string) []byte {
		q := []byte{'"'}
		for _, c := range []byte(name) {
			switch {
			case c == '"' || c == '\\':
				q = append(q, '\\', c)
			case c < 0x80 && r.IntN(8) == 0:
				q = fmt.Appendf(q, `\u%04x`, c)
			default:
				q = append(q, c)
			}
		}
		return append(q, '"')
	}
	for range 2000 {
		var pl plan
		var names []string
		for slot := range numSlots {
			name := word(1 + r.IntN(20))
			if len(names) > 0 && r.IntN(2) == 0 { // the same length, a byte apart
				b := []byte(names[r.IntN(len(names))])
				i := r.IntN(len(b))
				if b[i] < 0x80 {
					b[i] ^= 1
				}
				name = string(b)
			}
			names = append(names, name)
			pl.add([]string{name}, slot)
		}
		for range 20 {
			key := names[r.IntN(len(names))]
			if b := []byte(key); r.IntN(2) == 0 {
				if i := r.IntN(len(b)); b[i] < 0x80 {
					b[i] ^= 2
				}
				key = string(b)
			}
			q := quote(key)
			_, flags, ok := scanString(q, 0)
			if !ok {
				t.Fatalf("scanString(%s) failed", q)
			}
			got := pl.lookup(q, flags)
			var want *planKey
			for i := range pl.keys {
				if pl.keys[i].name == key {
					want = &pl.keys[i]
				}
			}
			if got != want {
				t.Fatalf("lookup(%s) in %q = %v, want %v", q, names, got, want)
			}
		}
	}
}

// TestPlanMatchAgreesWithScanAndLookup checks the in-place match of member
// names against scanning the string and looking it up: on names of the
// plan, their prefixes and extensions, escaped forms and strings cut short,
// wherever match finds a key the scan ends at the same index and the
// lookup finds the same key.
func TestPlanMatchAgreesWithScanAndLookup(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	letters := []string{"t", "s", "d", "e", "_", `\"`, `\\`, `\u0074`, "é", "\x01", ":", "}"}
	var pl plan
	names := []string{"device_id", "ts", "class", "timeout_ms", "parent", "t", "tsx", "dévice", "a\"b", "fourteen_bytes", "fifteen_bytes__"}
	for slot, name := range names[:numSlots] {
		pl.add([]string{name}, slot)
	}
	for _, name := range names[numSlots:] {
		pl.add([]string{name, "x"}, slotTS)
	}
	matched := 0
	for range 200000 {
		doc := `"` + names[r.IntN(len(names))]
		for range r.IntN(3) {
			if r.IntN(2) == 0 {
				doc = doc[:r.IntN(len(doc))+1]
			} else {
				doc += letters[r.IntN(len(letters))]
			}
		}
		if r.IntN(4) != 0 {
			doc += `"`
		}
		doc += []string{"", ":1}", `":`, " "}[r.IntN(4)]
		v := []byte(doc)
		k, end := pl.match(v, 0)
		if k == nil {
			continue
		}
		matched++
		e, flags, ok := scanString(v, 0)
		if !ok || e != end {
			t.Fatalf("match(%q) ends at %d; scanString: %d, %v", v, end, e, ok)
		}
		if want := pl.lookup(v[:e], flags); want != k {
			t.Fatalf("match(%q) = %q; lookup finds %v", v, k.name, want)
		}
	}
	if matched < 10000 {
		t.Fatalf("only %d of 200000 names matched in place", matched)
	}
}

// TestParseObjectFillsEverySlotOfAMember checks that a member named by
// several fields' paths fills each of their slots, and one named by one
// path only its own, the last occurrence winning.
func TestParseObjectFillsEverySlotOfAMember(t *testing.T) {
	t.Parallel()
	var pl plan
	pl.add([]string{"x"}, slotTS)
	pl.add([]string{"x"}, slotClass)
	pl.add([]string{"y", "z"}, slotParent)
	pl.add([]string{"y"}, slotTimeout)
	pl.add([]string{"w"}, slotIDCheck)
	v := []byte(`{"w":1,"x":"a","y":{"z":"b"},"w":"c"}`)
	var f fields
	if r := parseObject(v, &pl, &f); r != "" {
		t.Fatalf("parseObject: %s", r)
	}
	text := func(slot int) string { return string(v[f[slot].start:f[slot].end]) }
	for _, c := range []struct {
		slot int
		want string
		kind valueKind
	}{{slotTS, "a", kindString}, {slotClass, "a", kindString}, {slotParent, "b", kindString},
		{slotTimeout, "", kindOther}, {slotIDCheck, "c", kindString}, {slotID, "", kindAbsent}} {
		if got := text(c.slot); got != c.want || f[c.slot].kind != c.kind {
			t.Errorf("slot %d: %q of kind %d, want %q of kind %d", c.slot, got, f[c.slot].kind, c.want, c.kind)
		}
	}
}

// TestValidUTF8MatchesUTF8Valid checks the short ASCII answers against
// utf8.Valid, on texts of 0-24 bytes with a high byte anywhere or none.
func TestValidUTF8MatchesUTF8Valid(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	high := []byte{0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0xf0, 0xff}
	for n := 0; n < 200000; n++ {
		b := make([]byte, r.IntN(25))
		for i := range b {
			b[i] = byte(r.IntN(0x80))
		}
		if len(b) > 0 && r.IntN(2) == 0 {
			b[r.IntN(len(b))] = high[r.IntN(len(high))]
			if r.IntN(2) == 0 {
				b = append(b, "é"...)
			}
		}
		if got, want := validUTF8(b), utf8.Valid(b); got != want {
			t.Fatalf("validUTF8(%q) = %v, utf8.Valid says %v", b, got, want)
		}
	}
}

// TestNonDigits checks the eight-byte digit test against looking at each
// byte, on words of digits and bytes around them.
func TestNonDigits(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	var w [8]byte
	for n := 0; n < 200000; n++ {
		for i := range w {
			w[i] = '0' + byte(r.IntN(10))
			if r.IntN(6) == 0 {
				w[i] = []byte{'/', ':', 0x00, 0x7f, 0x80, 0xb0, 0xb9, 0xff, 0x3a, 0x2f, 0x09, 0x39 | 0x80}[r.IntN(12)]
			}
		}
		var want uint64
		for i, c := range w {
			if c < '0' || c > '9' {
				want |= 0x80 << (8 * i)
			}
		}
		if got := nonDigits(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("nonDigits(%q) = %#x, want %#x", w, got, want)
		}
	}
}

// TestSpecialBytes checks the SWAR string scan against the byte table.
func TestSpecialBytes(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	interesting := []byte{0x00, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7e, 0x7f, 0x80, 0xc3, 0xff, 'a', '0'}
	var w [8]byte
	for n := 0; n < 200000; n++ {
		for i := range w {
			if r.IntN(3) == 0 {
				w[i] = byte(r.IntN(256))
			} else {
				w[i] = interesting[r.IntN(len(interesting))]
			}
		}
		first := 8
		for i, c := range w {
			if !plainString[c] {
				first = i
				break
			}
		}
		m := specialBytes(binary.LittleEndian.Uint64(w[:]))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) / 8
		}
		if got != first {
			t.Fatalf("specialBytes(%q): first special byte %d, want %d", w, got, first)
		}
	}
}

// FuzzUnquote checks that unquote decodes every string scanString accepts
// exactly as encoding/json does, whatever its runs of plain bytes, escapes
// and invalid UTF-8.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{
		``, `plain`, `{\"ts\":1763683200100,\"class\":\"sensor\",\"temp\":21.5}`,
		`12345678\"12345678\\`, `\u00e9t\u00e9 \ud83d\ude00 \ud800 x`, "h\xc3\xa9llo \xff\xfe tail",
		`\b\f\n\r\t\/`, "seven77\\n" + "eight888",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := []byte(`"` + s + `"`)
		end, _, ok := scanString(q, 0)
		if !ok || end != len(q) {
			return
		}
		var want string
		if err := json.Unmarshal(q, &want); err != nil {
			t.Fatalf("scanString accepts %q, encoding/json does not: %v", q, err)
		}
		if got := unquote(nil, []byte(s)); string(got) != want {
			t.Fatalf("unquote(%q) = %q, encoding/json gives %q", s, got, want)
		}
	})
}
