package decode

import (
	"testing"
	"time"
)

// TestParseRFC3339MsAgreesWithTime compares the hand-written RFC 3339 parser
// with package time over many instants, precisions and offsets.
func TestParseRFC3339MsAgreesWithTime(t *testing.T) {
	t.Parallel()
	layouts := []string{time.RFC3339, time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000000Z07:00"}
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600+30*60), time.FixedZone("", -(11*3600 + 59*60)), time.FixedZone("", 23*3600+59*60)}
	r := newRand(t)
	lo, hi := time.Date(0, 1, 2, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC).Unix()
	for i := 0; i < 20000; i++ {
		// 0000-01-02 .. 9999-12-30, so the instant has a 4-digit year in every zone.
		sec := lo + r.Int64N(hi-lo)
		if i%4 == 0 {
			sec = testKafkaMs/1000 + r.Int64N(1e6) - 5e5
		}
		ts := time.Unix(sec, r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
		s := ts.Format(layouts[r.IntN(len(layouts))])
		want, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatalf("time.Parse(%q): %v", s, err)
		}
		got, ok := parseRFC3339Ms([]byte(s))
		if !ok || got != want.UnixMilli() {
			t.Fatalf("parseRFC3339Ms(%q) = %d, %v; want %d", s, got, ok, want.UnixMilli())
		}
	}
}
