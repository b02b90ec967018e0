package maintenance_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/shard"
)

func win(id string, m shard.WindowMatch, from, until int64) shard.Window {
	return shard.Window{ID: id, Match: m, FromMs: from, UntilMs: until}
}

// A due device is held by the open window that matches it by id, class or
// prefix, and among several by the one ending last; windows ended, not yet
// started at its deadline, or matching something else hold nothing.
func TestHoldingPicksTheMatchingWindowThatEndsLast(t *testing.T) {
	t.Parallel()
	ended := win("ended", shard.WindowMatch{Prefix: "rack-"}, 0, 9000)
	ended.EndedAtMs = 500
	x := maintenance.NewIndex([]shard.Window{
		win("dev", shard.WindowMatch{Devices: []string{"a", "rack-1/d"}}, 0, 3000),
		win("cls", shard.WindowMatch{Class: "meter"}, 0, 4000),
		win("rack", shard.WindowMatch{Prefix: "rack-1/"}, 0, 5000),
		win("rack2", shard.WindowMatch{Prefix: "rack-"}, 0, 2000),
		win("late", shard.WindowMatch{Prefix: "r"}, 900, 8000),
		ended,
	}, 1000)
	for _, c := range []struct {
		id, class string
		deadline  int64
		want      string
	}{
		{"a", "", 800, "dev"},
		{"a", "meter", 800, "cls"},
		{"rack-1/d", "", 800, "rack"},
		{"rack-2/x", "", 800, "rack2"},
		{"rack-2/x", "", 950, "late"}, // started by its deadline, ends last
		{"b", "sensor", 800, ""},      // matches nothing
		{"rack", "", 800, ""},         // shorter than every rack prefix
		{"x", "meter", 800, "cls"},
	} {
		w, ok := x.Holding(c.id, c.class, c.deadline, 1000)
		if got := map[bool]string{true: w.ID}[ok]; got != c.want {
			t.Errorf("Holding(%q, %q, %d) = %q, want %q", c.id, c.class, c.deadline, got, c.want)
		}
	}
	if w, ok := x.Holding("a", "", 800, 3000); ok {
		t.Errorf("at its until a window holds nothing, got %s", w.ID)
	}
	if got := len(x.Open(1000)); got != 5 {
		t.Errorf("%d open windows, want 5", got)
	}
}

// Only deadlines at a window's end, or a timeout after it, are looked up.
func TestMayHoldOnlyAtAWindowsEnd(t *testing.T) {
	t.Parallel()
	w := win("w", shard.WindowMatch{Prefix: "p"}, 0, 5000)
	w.EndedAtMs = 4000
	x := maintenance.NewIndex([]shard.Window{w}, 4500)
	for _, c := range []struct {
		deadline, timeout int64
		want              bool
	}{{5000, 30, true}, {4000, 30, true}, {4030, 30, true}, {5030, 30, true}, {4031, 30, false}} {
		if got := x.MayHold(c.deadline, c.timeout); got != c.want {
			t.Errorf("MayHold(%d, %d) = %v, want %v", c.deadline, c.timeout, got, c.want)
		}
	}
	if maintenance.NewIndex(nil, 0).MayHold(5000, 30) {
		t.Error("no windows: nothing may be held")
	}
}

// Each limit is refused with one line naming it and its value.
func TestRequestsBeyondALimitAreRefusedNamingIt(t *testing.T) {
	t.Parallel()
	cfg := maintenance.DefaultConfig()
	now := time.UnixMilli(1_800_000_000_000)
	many := make([]string, 1001)
	for k := range many {
		many[k] = "d" + strconv.Itoa(k)
	}
	for _, c := range []struct {
		r    maintenance.Request
		want string
	}{
		{maintenance.Request{Devices: many, For: time.Hour}, "--device takes at most 1,000 ids, got 1001"},
		{maintenance.Request{Prefix: "p", For: 169 * time.Hour}, "a window lasts at most maintenance.max_duration (168h0m0s), got 169h0m0s"},
		{maintenance.Request{Prefix: "p", Class: "c", For: time.Hour}, "give exactly one of --device, --class and --prefix"},
		{maintenance.Request{Prefix: "p"}, "give how long the window lasts: --for DURATION or --until RFC3339"},
	} {
		if _, err := c.r.Window(cfg, now); err == nil || err.Error() != c.want {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	w, err := maintenance.Request{Devices: []string{"a", "b", "a"}, Until: now.Add(time.Hour), Reason: "r"}.Window(cfg, now)
	if err != nil || len(w.Match.Devices) != 2 || w.UntilMs-w.FromMs != time.Hour.Milliseconds() || w.Reason != "r" {
		t.Fatalf("window %+v %v", w, err)
	}
}

// BenchmarkMatch is a due device's lookup with 10,000 windows open: a
// thousand prefixes, the rest classes and device lists.
func BenchmarkMatch(b *testing.B) {
	ws := make([]shard.Window, 0, maintenance.MaxOpen)
	for k := 0; k < maintenance.MaxOpen; k++ {
		id := "w" + strconv.Itoa(k)
		var m shard.WindowMatch
		switch k % 10 {
		case 0:
			m.Prefix = "site-" + strconv.Itoa(k) + "/"
		case 1:
			m.Class = "class-" + strconv.Itoa(k)
		default:
			m.Devices = []string{"dev-" + strconv.Itoa(k), "dev-" + strconv.Itoa(k) + "-b"}
		}
		ws = append(ws, win(id, m, 0, 1<<40))
	}
	x := maintenance.NewIndex(ws, 1)
	ids := []string{"site-5000/d-17", "dev-4242", "unmatched-device-0001"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = x.Holding(ids[i%len(ids)], "class-31", 100, 200)
	}
}
