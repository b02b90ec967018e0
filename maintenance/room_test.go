package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/shard"
)

// A Room sees a start and an end by polling the version, and an early end
// brings a parked device back to the actual end + its timeout, keeping the
// score's meta.
func TestRoomFollowsStartAndEndAndEndReleasesParkedDevices(t *testing.T) {
	t.Parallel()
	st, _ := testenv.Store(t)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := st.SetLayout(ctx, 0, shard.Layout{Count: 2, SinceMs: 1}); err != nil {
		t.Fatal(err)
	}
	room := maintenance.New(maintenance.Options{Store: st, Poll: 5 * time.Millisecond, Shards: func() int { return 2 }})
	if err := room.Load(ctx); err != nil || room.Active() {
		t.Fatalf("load: %v, active %v", err, room.Active())
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- room.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	now := time.Now()
	w, err := maintenance.Start(ctx, st, maintenance.DefaultConfig(), maintenance.Request{Prefix: "rack-7/", For: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the start", func() bool {
		id, end, ok := room.Holding("rack-7/d", "", now.UnixMilli(), time.Now().UnixMilli())
		return ok && id == w.ID && end == w.UntilMs
	})
	// d is parked at the window's end, in class 3 with a padded deadline.
	meta := shard.NewMeta(3, shard.FlagPadded)
	parked := shard.Score(w.UntilMs+250, meta)
	st.Client().ZAdd(ctx, st.Keys().Deadlines(1), redis.Z{Score: 1, Member: "rack-7/d"})
	if n, err := st.MoveHeld(ctx, 1, []shard.HeldMove{{ID: "rack-7/d", From: 1,
		Record: shard.HeldRecord{Stage: shard.HeldParked, Score: parked, TimeoutMs: 30_000, Window: w.ID}}}); err != nil || n != 1 {
		t.Fatalf("park: %d %v", n, err)
	}
	ended, n, err := maintenance.End(ctx, st, w.ID, time.Now(), nil)
	if err != nil || n != 1 {
		t.Fatalf("end: released %d, %v", n, err)
	}
	got := st.Client().ZScore(ctx, st.Keys().Deadlines(1), "rack-7/d").Val()
	if want := shard.Score(ended.EndedAtMs+30_000+250, meta); got != want {
		t.Fatalf("released to %v, want %v (end + timeout, pad and meta kept)", got, want)
	}
	waitFor(t, "the end", func() bool {
		_, _, ok := room.Holding("rack-7/d", "", now.UnixMilli(), time.Now().UnixMilli())
		return !ok && room.MayHold(ended.EndedAtMs+30_000, 30_000)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
