package decode

import (
	"math"
	"strconv"
)

// Times by magnitude (the README's "Real sources"): a numeric time below
// 10^11 is seconds (fractions allowed), below 10^14 milliseconds, below
// 10^17 microseconds, else nanoseconds — what a device or a bridge wrote is
// read as it meant it, whatever its unit. Fractions of a millisecond are
// truncated (toward zero). A string is RFC 3339 or a decimal number read
// the same way.

const (
	secondsBelow = 1e11
	millisBelow  = 1e14
	microsBelow  = 1e17
)

// numberMs reads a syntactically valid JSON number as a time, by its
// magnitude, in Unix ms.
func numberMs(num []byte, flags uint8) (int64, bool) {
	if flags&flagFrac == 0 {
		n, ok := parseInt(num)
		if !ok {
			return 0, false
		}
		return intMs(n), true
	}
	if ms, ok, exact := decimalMs(num); exact {
		return ms, ok
	}
	x, ok := parseFloat(num)
	if !ok {
		return 0, false
	}
	return floatMs(x)
}

// intMs scales an integer time by its magnitude.
func intMs(n int64) int64 {
	a := n
	if a < 0 {
		a = -a // math.MinInt64 stays negative: nanoseconds, as it should
	}
	switch {
	case a >= 0 && a < secondsBelow:
		return n * 1000
	case a >= 0 && a < millisBelow:
		return n
	case a >= 0 && a < microsBelow:
		return n / 1000
	default:
		return n / 1e6
	}
}

// decimalMs reads -?int.frac (no exponent) exactly, so that 1763683200.123
// seconds is 1763683200123 ms and not one less through a float. exact is
// false when the number has an exponent or an integer part too long for
// int64: then numberMs goes through a float.
func decimalMs(num []byte) (ms int64, ok, exact bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	dot := -1
	for i, c := range num {
		switch {
		case c == '.':
			dot = i
		case c == 'e' || c == 'E':
			return 0, false, false
		}
	}
	if dot < 0 || dot > 18 {
		return 0, false, false
	}
	whole, good := parseInt(num[:dot])
	if !good {
		return 0, false, false
	}
	frac := num[dot+1:]
	switch {
	case whole < secondsBelow:
		ms = whole * 1000
		scale := int64(100)
		for i := 0; i < len(frac) && i < 3; i++ {
			ms += int64(frac[i]-'0') * scale
			scale /= 10
		}
	case whole < millisBelow:
		ms = whole
	case whole < microsBelow:
		ms = whole / 1000
	default:
		ms = whole / 1e6
	}
	if neg {
		ms = -ms
	}
	return ms, true, true
}

// floatMs scales a float time by its magnitude, truncating toward zero.
func floatMs(x float64) (int64, bool) {
	a := math.Abs(x)
	switch {
	case a < secondsBelow:
		x *= 1000
	case a < millisBelow:
	case a < microsBelow:
		x /= 1000
	default:
		x /= 1e6
	}
	x = math.Trunc(x)
	// 2^63 is exact in float64; int64 spans [-2^63, 2^63).
	if !(x >= -(1<<63) && x < 1<<63) {
		return 0, false
	}
	return int64(x), true
}

// stringMs reads a time written as a string: RFC 3339, or a decimal number
// by its magnitude.
func stringMs(s []byte) (int64, bool) {
	if ms, ok := parseRFC3339Ms(s); ok {
		return ms, true
	}
	if len(s) == 0 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, false
	}
	end, flags, ok := scanNumber(s, 0)
	if !ok || end != len(s) {
		return 0, false
	}
	return numberMs(s, flags)
}

func strconvInt(n int64) string { return strconv.FormatInt(n, 10) }

// strconvFloat writes x as a JSON number (never NaN or Inf: those are
// written as text that does not parse, which the field rules refuse).
func strconvFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
