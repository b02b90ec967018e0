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
