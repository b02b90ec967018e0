package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// downFleet is a store with a two-shard layout and a policy knowing the
// class "cam".
func downFleet(t *testing.T) (*shard.Store, *timeouts.Policy, int) {
	t.Helper()
	store, _ := testenv.Store(t)
	ctx := context.Background()
	if _, err := store.SetLayout(ctx, 0, shard.Layout{Count: 2}); err != nil {
		t.Fatal(err)
	}
	ids, err := store.RegisterClasses(ctx, []string{"cam"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := timeouts.DefaultConfig()
	cfg.Classes = map[string]time.Duration{"cam": 30 * time.Second}
	return store, timeouts.NewPolicy(cfg, map[string]int{"cam": ids[0]}), ids[0]
}

func markDown(t *testing.T, store *shard.Store, i int, id string, score float64) {
	t.Helper()
	if err := store.Client().ZAdd(context.Background(), store.Keys().Down(i), redis.Z{Score: score, Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
}

// idIn returns the first of prefix-0, prefix-1, ... that l writes to
// shard i and, when l migrates, that moved there (moved) or did not.
func idIn(l shard.Layout, i int, prefix string, moved bool) string {
	for k := 0; ; k++ {
		id := fmt.Sprintf("%s-%d", prefix, k)
		h := shard.Hash(id)
		if _, m := l.PreviousOf(h); l.ShardOf(h) == i && m == moved {
			return id
		}
	}
}

// A page lists the devices of each shard in the down set's order (longest
// down first), shard after shard, decoded (class, the padding taken off),
// within the window and of the class asked for; a device also left in a
// shard it is not written to is listed from its own.
func TestListDownDecodesFiltersAndOrders(t *testing.T) {
	t.Parallel()
	store, policy, cam := downFleet(t)
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	l := shard.Layout{Count: 2}
	a, b, c, e := idIn(l, 0, "a", false), idIn(l, 1, "b", false), idIn(l, 1, "c", false), idIn(l, 1, "e", false)
	markDown(t, store, 0, a, shard.Score(ms(time.Minute), shard.NewMeta(cam, 0)))
	markDown(t, store, 1, b, shard.Score(ms(time.Hour)+50, shard.NewMeta(0, shard.FlagPadded))) // padded by 50ms
	markDown(t, store, 1, "old", shard.Score(ms(48*time.Hour), 0))                              // beyond the window
	// c is left in shard 0 too: its own shard's entry counts.
	markDown(t, store, 0, c, shard.Score(ms(3*time.Minute), shard.NewMeta(cam, 0)))
	markDown(t, store, 1, c, shard.Score(ms(2*time.Minute), shard.NewMeta(cam, 0)))
	// e is only where it is not written to: listed from there.
	markDown(t, store, 0, e, shard.Score(ms(5*time.Minute), 0))

	q := inspect.DownQuery{Window: 24 * time.Hour, Pad: 50 * time.Millisecond}
	got, err := inspect.ListDown(context.Background(), store, policy, q, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []inspect.DownDevice{
		{DeviceID: e, Shard: 0, DeadlineMs: ms(5 * time.Minute), DownForMs: (5 * time.Minute).Milliseconds(), State: inspect.StateTimedOut},
		{DeviceID: a, Shard: 0, Class: "cam", DeadlineMs: ms(time.Minute), DownForMs: time.Minute.Milliseconds(), State: inspect.StateTimedOut},
		{DeviceID: b, Shard: 1, DeadlineMs: ms(time.Hour), DownForMs: time.Hour.Milliseconds(), State: inspect.StateTimedOut},
		{DeviceID: c, Shard: 1, Class: "cam", DeadlineMs: ms(2 * time.Minute), DownForMs: (2 * time.Minute).Milliseconds(), State: inspect.StateTimedOut},
	}
	if fmt.Sprint(got.Devices) != fmt.Sprint(want) || got.Truncated || got.Next != "" {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	q.Class = "cam"
	got, err = inspect.ListDown(context.Background(), store, policy, q, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Devices) != 2 || got.Devices[0].DeviceID != a || got.Devices[1].DeviceID != c {
		t.Fatalf("--class cam: got %+v", got)
	}
}

// While a doubling migrates the down sets, a device in both of its shards
// is listed once: from the later deadline, from the shard it is written to
// now on a tie.
func TestListDownListsADeviceInTwoShardsOnce(t *testing.T) {
	t.Parallel()
	store, _ := testenv.Store(t)
	ctx := context.Background()
	l := shard.Layout{Count: 4, Previous: 2}
	if _, err := store.SetLayout(ctx, 0, l); err != nil {
		t.Fatal(err)
	}
	policy := timeouts.NewPolicy(timeouts.DefaultConfig(), nil)
	now := time.UnixMilli(1_800_000_000_000)
	at := func(d time.Duration) float64 { return shard.Score(now.Add(-d).UnixMilli(), 0) }
	// Devices that move from shard 0 to shard 2, and one that stays in 1.
	tie, older, newer, only, stays := idIn(l, 2, "tie", true), idIn(l, 2, "older", true), idIn(l, 2, "newer", true), idIn(l, 2, "only", true), idIn(l, 1, "stays", false)
	markDown(t, store, 0, tie, at(time.Minute))
	markDown(t, store, 2, tie, at(time.Minute))
	markDown(t, store, 0, older, at(time.Minute)) // the previous shard's is later
	markDown(t, store, 2, older, at(time.Hour))
	markDown(t, store, 0, newer, at(time.Hour))
	markDown(t, store, 2, newer, at(time.Minute)) // the current shard's is later
	markDown(t, store, 0, only, at(time.Hour))    // not swept yet
	markDown(t, store, 1, stays, at(time.Hour))

	got, err := inspect.ListDown(ctx, store, policy, inspect.DownQuery{}, now)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, d := range got.Devices {
		listed = append(listed, fmt.Sprintf("%s@%d", d.DeviceID, d.Shard))
	}
	want := []string{only + "@0", older + "@0", stays + "@1", newer + "@2", tie + "@2"}
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}
}

// pageAll follows the cursor from the start and returns every page.
func pageAll(t *testing.T, store *shard.Store, policy *timeouts.Policy, q inspect.DownQuery, now time.Time, between func(last inspect.DownList)) []inspect.DownList {
	t.Helper()
	var pages []inspect.DownList
	for {
		got, err := inspect.ListDown(context.Background(), store, policy, q, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Devices) > q.Limit || got.Truncated != (got.Next != "") {
			t.Fatalf("page %d: %d devices (limit %d), truncated %v, next %q", len(pages), len(got.Devices), q.Limit, got.Truncated, got.Next)
		}
		pages = append(pages, got)
		if got.Next == "" {
			return pages
		}
		if len(pages) > 10_000 {
			t.Fatal("the cursor does not move on")
		}
		if between != nil {
			between(got)
		}
		q.Cursor = got.Next
	}
}

// Pages follow one another in a stable order: every device that stays
// down while the pages are read is listed once, in the order of a listing
// in one page, though devices time out and recover between pages, many
// around the cursor, among hundreds that share one deadline (a mass
// expiry); the last page says no more follow.
func TestListDownPagesInAStableOrder(t *testing.T) {
	t.Parallel()
	store, policy, _ := downFleet(t)
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	l := shard.Layout{Count: 2}
	type entry struct {
		shard int
		score float64
	}
	down := make(map[string]entry)
	add := func(id string, score float64) {
		i := l.ShardOf(shard.Hash(id))
		markDown(t, store, i, id, score)
		down[id] = entry{i, score}
	}
	// 400 devices down at one instant, 200 at deadlines of their own.
	mass := shard.Score(now.Add(-time.Hour).UnixMilli(), 0)
	for k := range 400 {
		add(fmt.Sprintf("mass-%03d", k), mass)
	}
	for k := range 200 {
		add(fmt.Sprintf("own-%03d", k), shard.Score(now.Add(-time.Duration(k)*time.Second).UnixMilli(), 0))
	}

	q := inspect.DownQuery{Limit: 10_000}
	one, err := inspect.ListDown(ctx, store, policy, q, now)
	if err != nil || one.Next != "" || len(one.Devices) != len(down) {
		t.Fatalf("one page: %d devices, next %q, %v; want %d", len(one.Devices), one.Next, err, len(down))
	}
	order := make(map[string]int, len(one.Devices))
	for k, d := range one.Devices {
		order[d.DeviceID] = k
	}

	// Without writes between them, pages of any size make the same list.
	for _, limit := range []int{1, 7, 599, 600} {
		var ids []string
		for _, p := range pageAll(t, store, policy, inspect.DownQuery{Limit: limit, Chunk: 5}, now, nil) {
			for _, d := range p.Devices {
				ids = append(ids, d.DeviceID)
			}
		}
		for k, id := range ids {
			if k >= len(one.Devices) || one.Devices[k].DeviceID != id {
				t.Fatalf("limit %d: device %d is %s, want the one-page order", limit, k, id)
			}
		}
		if len(ids) != len(one.Devices) {
			t.Fatalf("limit %d: %d devices, want %d", limit, len(ids), len(one.Devices))
		}
	}

	// With writes between pages: recoveries before and after the cursor
	// (within the mass expiry, more of them than a read's slack at once),
	// and new timeouts before and after it.
	r := rand.New(rand.NewPCG(3, 5))
	gone := make(map[string]bool)
	comeBack := func(id string) {
		if gone[id] {
			return
		}
		gone[id] = true
		if err := store.Client().ZRem(ctx, store.Keys().Down(down[id].shard), id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var listedMass []string // of the cursor's shard, while it is in the mass expiry
	emptied := false
	extra := 0
	between := func(last inspect.DownList) {
		tail := last.Devices[len(last.Devices)-1]
		for _, d := range last.Devices {
			if down[d.DeviceID].score == mass && d.Shard == tail.Shard {
				listedMass = append(listedMass, d.DeviceID)
			}
		}
		// Once, every device of the mass expiry listed before the cursor
		// recovers: more than a read's slack, so the next page has to find
		// its place in the run again.
		if !emptied && down[tail.DeviceID].score == mass && len(listedMass) > 100 {
			emptied = true
			for _, id := range listedMass {
				comeBack(id)
			}
		}
		for range 30 {
			// A device at random, listed or not.
			comeBack(one.Devices[r.IntN(len(one.Devices))].DeviceID)
		}
		for range 5 {
			extra++
			score := mass
			if extra%2 == 0 {
				score = shard.Score(now.Add(-time.Duration(r.IntN(300))*time.Second).UnixMilli(), 0)
			}
			add(fmt.Sprintf("new-%03d", extra), score)
		}
	}
	pages := pageAll(t, store, policy, inspect.DownQuery{Limit: 25, Chunk: 8}, now, between)
	if !emptied {
		t.Fatal("the mass expiry never emptied before the cursor: the test proves little")
	}
	seen := make(map[string]bool)
	var listed []string
	for _, p := range pages {
		for _, d := range p.Devices {
			if seen[d.DeviceID] {
				t.Fatalf("%s listed twice", d.DeviceID)
			}
			seen[d.DeviceID] = true
			listed = append(listed, d.DeviceID)
		}
	}
	for _, d := range one.Devices {
		if !gone[d.DeviceID] && !seen[d.DeviceID] {
			t.Errorf("%s stayed down and was not listed", d.DeviceID)
		}
	}
	// In the listing's order: by shard, score, then id.
	for k := 1; k < len(listed); k++ {
		a, b := down[listed[k-1]], down[listed[k]]
		ia, ib := listed[k-1], listed[k]
		if a.shard > b.shard || a.shard == b.shard && (a.score > b.score || a.score == b.score && ia >= ib) {
			t.Fatalf("%s (%+v) listed before %s (%+v)", ia, a, ib, b)
		}
	}
	if len(gone) < 200 {
		t.Fatalf("only %d recoveries between pages: the test proves little", len(gone))
	}
}

// A page ends with a cursor only when a device of the class asked for
// follows it; the limit defaults to a page of DownPageDefault; a cursor
// the listing did not give is a CursorError.
func TestListDownNextOnlyWhenMoreFollow(t *testing.T) {
	t.Parallel()
	store, policy, cam := downFleet(t)
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	for k := range 30 {
		meta := shard.Meta(0)
		if k%3 == 0 {
			meta = shard.NewMeta(cam, 0)
		}
		markDown(t, store, k%2, fmt.Sprintf("d-%02d", k), shard.Score(now.UnixMilli()-int64(k), meta))
	}
	for _, tc := range []struct {
		q     inspect.DownQuery
		pages []int
	}{
		{inspect.DownQuery{Limit: 30}, []int{30}},
		{inspect.DownQuery{Limit: 29}, []int{29, 1}},
		{inspect.DownQuery{Limit: 10, Class: "cam"}, []int{10}},
		{inspect.DownQuery{Limit: 4, Class: "cam", Chunk: 2}, []int{4, 4, 2}},
		{inspect.DownQuery{Limit: 1, Class: "nope"}, []int{0}},
	} {
		var sizes []int
		for _, p := range pageAll(t, store, policy, tc.q, now, nil) {
			sizes = append(sizes, len(p.Devices))
		}
		if fmt.Sprint(sizes) != fmt.Sprint(tc.pages) {
			t.Errorf("%+v: pages of %v, want %v", tc.q, sizes, tc.pages)
		}
	}
	for k := range inspect.DownPageDefault + 1 - 30 {
		markDown(t, store, 0, fmt.Sprintf("more-%04d", k), shard.Score(now.UnixMilli(), 0))
	}
	got, err := inspect.ListDown(ctx, store, policy, inspect.DownQuery{}, now)
	if err != nil || len(got.Devices) != inspect.DownPageDefault || got.Next == "" {
		t.Errorf("no limit: %d devices, next %q, %v; want a page of %d and a cursor", len(got.Devices), got.Next, err, inspect.DownPageDefault)
	}
	for _, bad := range []string{"x", "bm9wZQ", "!" + got.Next, "LTE6MDoxOmE"} {
		_, err := inspect.ListDown(ctx, store, policy, inspect.DownQuery{Cursor: bad}, now)
		var ce *inspect.CursorError
		if !errors.As(err, &ce) {
			t.Errorf("cursor %q: %v, want a CursorError", bad, err)
		}
	}
}

// CountDown splits the devices down by class name while they are few, and
// gives the total alone beyond the limit; ReadDown counts the same total.
func TestCountDownSplitsByClassUpToTheLimit(t *testing.T) {
	t.Parallel()
	store, policy, cam := downFleet(t)
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	markDown(t, store, 0, "a", shard.Score(ms(time.Minute), shard.NewMeta(cam, 0)))
	markDown(t, store, 1, "b", shard.Score(ms(time.Hour), shard.NewMeta(cam, shard.FlagOverride)))
	markDown(t, store, 1, "c", shard.Score(ms(time.Hour), 0))
	markDown(t, store, 0, "d", shard.Score(ms(2*time.Hour), shard.NewMeta(77, 0))) // a class id the policy does not know
	markDown(t, store, 1, "old", shard.Score(ms(48*time.Hour), shard.NewMeta(cam, 0)))

	got, err := inspect.CountDown(ctx, store, policy, 2, 24*time.Hour, 10, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"cam": 2, "": 2}; got.Total != 4 || fmt.Sprint(got.ByClass) != fmt.Sprint(want) {
		t.Errorf("got total %d by class %v, want 4 and %v", got.Total, got.ByClass, want)
	}
	if got.RoundTrips != 2 {
		t.Errorf("%d round trips, want 2 (the total, then the split)", got.RoundTrips)
	}
	// Window 0: every entry the down sets hold.
	if got, err := inspect.CountDown(ctx, store, policy, 2, 0, 10, now); err != nil || got.Total != 5 || got.ByClass["cam"] != 3 {
		t.Errorf("window 0: %+v, %v; want all 5, 3 of class cam", got, err)
	}
	// Above the limit: the total alone, in one round trip.
	got, err = inspect.CountDown(ctx, store, policy, 2, 24*time.Hour, 3, now)
	if err != nil || got.Total != 4 || got.ByClass != nil || got.RoundTrips != 1 {
		t.Errorf("over the limit: %+v, %v; want total 4, no split, 1 round trip", got, err)
	}
	// Nothing down: every configured class and "no class" at 0.
	got, err = inspect.CountDown(ctx, store, policy, 2, time.Second, 10, now)
	if want := map[string]int64{"cam": 0, "": 0}; err != nil || got.Total != 0 || fmt.Sprint(got.ByClass) != fmt.Sprint(want) {
		t.Errorf("none down: %+v, %v; want %v", got, err, want)
	}

	st, err := inspect.ReadStatus(ctx, store, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReadDown(ctx, store, 24*time.Hour, now); err != nil || st.Down != 4 {
		t.Errorf("status down %d, %v; want 4", st.Down, err)
	}
}
