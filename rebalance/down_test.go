package rebalance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
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

func TestListDownDecodesFiltersAndOrders(t *testing.T) {
	t.Parallel()
	store, policy, cam := downFleet(t)
	now := time.UnixMilli(1_800_000_000_000)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	markDown(t, store, 0, "a", shard.Score(ms(time.Minute), shard.NewMeta(cam, 0)))
	markDown(t, store, 1, "b", shard.Score(ms(time.Hour)+50, shard.NewMeta(0, shard.FlagPadded))) // padded by 50ms
	markDown(t, store, 1, "old", shard.Score(ms(48*time.Hour), 0))                                // beyond the window
	// Left in both shards by a sweep: the later deadline counts.
	markDown(t, store, 0, "c", shard.Score(ms(3*time.Minute), shard.NewMeta(cam, 0)))
	markDown(t, store, 1, "c", shard.Score(ms(2*time.Minute), shard.NewMeta(cam, 0)))

	q := rebalance.DownQuery{Window: 24 * time.Hour, Pad: 50 * time.Millisecond}
	got, err := rebalance.ListDown(context.Background(), store, policy, q, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []rebalance.DownDevice{
		{DeviceID: "b", Shard: 1, DeadlineMs: ms(time.Hour), DownForMs: time.Hour.Milliseconds()},
		{DeviceID: "c", Shard: 1, Class: "cam", DeadlineMs: ms(2 * time.Minute), DownForMs: (2 * time.Minute).Milliseconds()},
		{DeviceID: "a", Shard: 0, Class: "cam", DeadlineMs: ms(time.Minute), DownForMs: time.Minute.Milliseconds()},
	}
	if fmt.Sprint(got.Devices) != fmt.Sprint(want) || got.Truncated {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	q.Class = "cam"
	got, err = rebalance.ListDown(context.Background(), store, policy, q, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Devices) != 2 || got.Devices[0].DeviceID != "c" || got.Devices[1].DeviceID != "a" {
		t.Fatalf("--class cam: got %+v", got)
	}
}

func TestListDownStopsAtTheLimitAcrossScanCalls(t *testing.T) {
	t.Parallel()
	store, policy, _ := downFleet(t)
	now := time.UnixMilli(1_800_000_000_000)
	// More than a listpack holds, so ZSCAN pages with a cursor.
	const n = 300
	for k := range n {
		markDown(t, store, k%2, fmt.Sprintf("d-%03d", k), shard.Score(now.UnixMilli()-int64(k), 0))
	}
	ctx := context.Background()
	all, err := rebalance.ListDown(ctx, store, policy, rebalance.DownQuery{ScanCount: 10}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Devices) != n || all.Truncated {
		t.Fatalf("no limit: %d devices, truncated %v", len(all.Devices), all.Truncated)
	}
	for _, limit := range []int{1, 7, 150, n} {
		got, err := rebalance.ListDown(ctx, store, policy, rebalance.DownQuery{Limit: limit, ScanCount: 10}, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Devices) != limit || got.Truncated != (limit < n) {
			t.Fatalf("limit %d: %d devices, truncated %v", limit, len(got.Devices), got.Truncated)
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

	got, err := rebalance.CountDown(ctx, store, policy, 2, 24*time.Hour, 10, now)
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
	if got, err := rebalance.CountDown(ctx, store, policy, 2, 0, 10, now); err != nil || got.Total != 5 || got.ByClass["cam"] != 3 {
		t.Errorf("window 0: %+v, %v; want all 5, 3 of class cam", got, err)
	}
	// Above the limit: the total alone, in one round trip.
	got, err = rebalance.CountDown(ctx, store, policy, 2, 24*time.Hour, 3, now)
	if err != nil || got.Total != 4 || got.ByClass != nil || got.RoundTrips != 1 {
		t.Errorf("over the limit: %+v, %v; want total 4, no split, 1 round trip", got, err)
	}
	// Nothing down: every configured class and "no class" at 0.
	got, err = rebalance.CountDown(ctx, store, policy, 2, time.Second, 10, now)
	if want := map[string]int64{"cam": 0, "": 0}; err != nil || got.Total != 0 || fmt.Sprint(got.ByClass) != fmt.Sprint(want) {
		t.Errorf("none down: %+v, %v; want %v", got, err, want)
	}

	st, err := rebalance.ReadStatus(ctx, store, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReadDown(ctx, store, 24*time.Hour, now); err != nil || st.Down != 4 {
		t.Errorf("status down %d, %v; want 4", st.Down, err)
	}
}
