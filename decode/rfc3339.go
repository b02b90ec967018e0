package decode

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

// digits reads a fixed-width field of decimal digits.
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
