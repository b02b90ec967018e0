package scanner_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// A replayed heartbeat that ingest wrote before it saw the device's down
// entry (shard.Store.Write checks the down set after its plain ZADD GT) is
// in the shard, due, and not later than the timeout the device already
// fired: the scanner drops it instead of firing that silence again. A
// member later than its down entry is a device that came back and went
// silent again: it fires.
func TestReplayBehindDownSetNeverFires(t *testing.T) {
	t.Parallel()
	store, rdb := newStore(t)
	kf := testenv.Kafka(t, 1, "device-timeouts")
	ctx := context.Background()
	now := time.Now().UnixMilli()
	fired := shard.Score(now-5000, 0) // the timeout each down device fired
	if _, _, err := store.Fired(ctx, 0, []shard.Member{{ID: "replayed", Score: fired}, {ID: "same", Score: fired}, {ID: "back", Score: fired}}, 0); err != nil {
		t.Fatal(err)
	}
	// Written as ingest's ZADD GT does, past the down set.
	keys := store.Keys()
	if err := rdb.ZAdd(ctx, keys.Deadlines(0),
		redis.Z{Member: "replayed", Score: shard.Score(now-8000, 0)},
		redis.Z{Member: "same", Score: fired},
		redis.Z{Member: "back", Score: shard.Score(now-1000, 0)},
		redis.Z{Member: "fresh", Score: shard.Score(now-1000, 0)},
	).Err(); err != nil {
		t.Fatal(err)
	}

	got, m := runScanner(t, store, fixedLayout{l: shard.Layout{Count: 1}}, kf.Brokers(), []int{0})
	// Done when the shard is empty: every member either fired (published,
	// then removed) or was dropped; nothing is left that could fire later.
	seen := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := rdb.ZCard(ctx, keys.Deadlines(0)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && len(seen) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard still holds %d members; fired %v", n, seen)
		}
		select {
		case id := <-got:
			seen[id]++
		case <-time.After(20 * time.Millisecond):
		}
	}
	for drained := false; !drained; {
		select {
		case id := <-got:
			seen[id]++
		default:
			drained = true
		}
	}
	if len(seen) != 2 || seen["back"] != 1 || seen["fresh"] != 1 {
		t.Errorf("fired %v; want back and fresh once each", seen)
	}
	if n := testutil.ToFloat64(m.TimeoutsPublished); n != 2 {
		t.Errorf("timeouts published = %v, want 2 (back and fresh)", n)
	}
	if n := testutil.ToFloat64(m.ReplaysDropped); n != 2 {
		t.Errorf("replays dropped = %v, want 2", n)
	}
}
