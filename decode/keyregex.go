package decode

import (
	"bytes"
	"regexp/syntax"
	"unicode/utf8"
)

// The common key:<regex> — a literal prefix, a capture of one or more
// characters up to a separator, the separator and maybe more
// (`^devices/([^/]+)/`, the shape of MQTT topics) — is matched here with
// byte operations, without regexp's machinery: the MQTT-topic shape is
// read on every heartbeat. Any other regex goes to regexp.

// segmentMatch is a regex of the form ^P([^c]+)S… : literal prefix P, a
// capture of bytes other than the ASCII byte c, then either the end of the
// regex, or S starting with c (then anything may follow, or, with end set,
// nothing).
type segmentMatch struct {
	prefix, suffix []byte
	sep            byte
	end            bool // the regex ends with $ (\z): nothing after the suffix
}

// compileSegment returns the fast matcher of expr, or nil when expr is not
// of that form (regexp then matches it).
func compileSegment(expr string) *segmentMatch {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 {
		return nil
	}
	subs := re.Sub
	if subs[0].Op != syntax.OpBeginText {
		return nil
	}
	subs = subs[1:]
	m := &segmentMatch{}
	if len(subs) > 0 && subs[0].Op == syntax.OpLiteral {
		if m.prefix = literalBytes(subs[0]); m.prefix == nil {
			return nil
		}
		subs = subs[1:]
	}
	if len(subs) == 0 || subs[0].Op != syntax.OpCapture || subs[0].Cap != 1 {
		return nil
	}
	sep, ok := plusNotByte(subs[0].Sub[0])
	if !ok {
		return nil
	}
	m.sep = sep
	subs = subs[1:]
	if len(subs) > 0 && subs[0].Op == syntax.OpLiteral {
		if m.suffix = literalBytes(subs[0]); m.suffix == nil || m.suffix[0] != sep {
			return nil // greedy capture then suffix is exact only when the suffix starts at the separator
		}
		subs = subs[1:]
	}
	if len(subs) > 0 && subs[0].Op == syntax.OpEndText {
		m.end = true
		subs = subs[1:]
	}
	if len(subs) != 0 {
		return nil
	}
	return m
}

// literalBytes is an ASCII literal without case folding, or nil.
func literalBytes(re *syntax.Regexp) []byte {
	if re.Flags&syntax.FoldCase != 0 {
		return nil
	}
	var b []byte
	for _, r := range re.Rune {
		if r >= utf8.RuneSelf {
			return nil
		}
		b = append(b, byte(r))
	}
	return b
}

// plusNotByte reports whether re is [^c]+ for an ASCII byte c (newline
// allowed or not does not matter to keys without newlines, but must match
// regexp exactly: [^c] in Go's regexp matches \n too), and returns c.
func plusNotByte(re *syntax.Regexp) (byte, bool) {
	if re.Op != syntax.OpPlus || re.Flags&syntax.NonGreedy != 0 || re.Sub[0].Op != syntax.OpCharClass {
		return 0, false
	}
	r := re.Sub[0].Rune
	// [^c] is the ranges [0, c-1] and [c+1, MaxRune].
	if len(r) != 4 || r[0] != 0 || r[3] != utf8.MaxRune || r[1]+2 != r[2] || r[1]+1 >= utf8.RuneSelf {
		return 0, false
	}
	return byte(r[1] + 1), true
}

// match returns the capture's bounds in key, or ok false when key does not
// match.
func (m *segmentMatch) match(key []byte) (start, end int, ok bool) {
	if !bytes.HasPrefix(key, m.prefix) {
		return 0, 0, false
	}
	start = len(m.prefix)
	end = start
	if i := bytes.IndexByte(key[start:], m.sep); i >= 0 {
		end = start + i
	} else {
		end = len(key)
	}
	if end == start {
		return 0, 0, false // one or more
	}
	rest := key[end:]
	if !bytes.HasPrefix(rest, m.suffix) {
		return 0, 0, false
	}
	if m.end && len(rest) != len(m.suffix) {
		return 0, 0, false
	}
	return start, end, true
}
