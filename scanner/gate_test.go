package scanner_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
)

// hourlyGate returns a gate polling, once an hour, a store whose two
// partitions' watermarks are at t0, a minute ago: within a test only local
// raises move it past its first poll.
func hourlyGate(t *testing.T) (gate *scanner.Gate, t0 int64) {
	t.Helper()
	store, _ := newStore(t)
	t0 = time.Now().Add(-time.Minute).UnixMilli()
	if err := store.RaiseWatermarks(context.Background(), 2, map[int]int64{0: t0, 1: t0}); err != nil {
		t.Fatal(err)
	}
	return scanner.NewGate(store, time.Hour, 0, 0, time.Hour, slog.New(slog.DiscardHandler)), t0
}

// Watermarks this process's ingest hands over (Gate.Raised) move the gate
// at once, between polls; the minimum still counts every partition.
func TestGateTakesLocalRaisesBetweenPolls(t *testing.T) {
	t.Parallel()
	gate, t0 := hourlyGate(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	advanced := make(chan int64, 10)
	gate.OnAdvance(func(wm int64) { advanced <- wm })
	go func() { _ = gate.Run(ctx) }()
	if wm := <-advanced; wm != t0 {
		t.Fatalf("first poll: watermark %d, want %d", wm, t0)
	}

	gate.Raised(map[int]int64{0: t0 + 500})
	select {
	case wm := <-advanced:
		t.Fatalf("watermark moved to %d with partition 1 still at %d", wm, t0)
	case <-time.After(200 * time.Millisecond):
	}
	gate.Raised(map[int]int64{1: t0 + 300})
	select {
	case wm := <-advanced:
		if wm != t0+300 {
			t.Fatalf("watermark %d, want the minimum %d", wm, t0+300)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a local raise did not move the gate before the next poll (an hour away)")
	}
	if got := gate.Watermark(); got != t0+300 {
		t.Fatalf("Watermark() = %d, want %d", got, t0+300)
	}
}

// A local raise moves the gate and wakes its waiters before Raised returns,
// on the caller's goroutine: it never waits for the gate's own goroutine,
// which is mostly in a poll's round trip to Redis (here it never runs).
func TestGateMovesWithinRaised(t *testing.T) {
	t.Parallel()
	gate, t0 := hourlyGate(t)
	ctx := context.Background()
	var advanced []int64
	gate.OnAdvance(func(wm int64) { advanced = append(advanced, wm) })
	if err := gate.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	gate.Raised(map[int]int64{0: t0 + 500, 1: t0 + 300})
	if got := gate.Watermark(); got != t0+300 {
		t.Fatalf("Watermark() right after Raised = %d, want %d", got, t0+300)
	}
	if len(advanced) != 2 || advanced[1] != t0+300 {
		t.Fatalf("waiters saw %v, want the poll's %d then the raise's %d", advanced, t0, t0+300)
	}
}

// The gate reads the other instances' watermarks every poll only while a
// deadline waits for the watermark; with none waiting it idles (here an
// hour). A deadline the watermark holds back makes it poll, so another
// instance's raise in Redis fires it; once it fired, the gate idles again.
func TestGatePollsOnlyWhileADeadlineWaits(t *testing.T) {
	t.Parallel()
	store, rdb := newStore(t)
	ctx := testenv.Context(t, 30*time.Second)
	log := slog.New(slog.DiscardHandler)
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: t0, 1: t0}); err != nil {
		t.Fatal(err)
	}
	gate := scanner.NewGate(store, 5*time.Millisecond, time.Hour, 0, time.Hour, log)
	advanced := make(chan int64, 100)
	gate.OnAdvance(func(wm int64) { advanced <- wm })
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	running.Go(func() { _ = gate.Run(runCtx) })
	if wm := <-advanced; wm != t0 {
		t.Fatalf("first read: watermark %d, want %d", wm, t0)
	}
	// Another instance raises its partitions. Nothing waits: no read.
	quiet := func(what string) {
		t.Helper()
		select {
		case wm := <-advanced:
			t.Fatalf("%s: the gate read the raise to %d with no deadline waiting", what, wm)
		case <-time.After(300 * time.Millisecond):
		}
	}
	t1 := time.Now().Add(-30 * time.Second).UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: t1, 1: t1}); err != nil {
		t.Fatal(err)
	}
	quiet("before any deadline")

	// A deadline due by the clock, past the watermark the gate last read
	// (t0) and the one in Redis (t1): the scanner holds it and the gate
	// polls until a raise passes it.
	hooks, fired := firedIDs()
	cfg := scanner.DefaultConfig()
	cfg.Interval = time.Hour // no safety-net poll wakes the shard: only the gate's reads can
	sc, err := scanner.New(cfg, scanner.Options{
		Store: store, Dispatcher: &countingDispatcher{}, Gate: gate, Layout: fixedLayout{shard.Layout{Count: 1}},
		Metrics: metrics.New(), Log: log, DrainTimeout: 5 * time.Second, Hooks: hooks,
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(-10 * time.Second).UnixMilli()
	keys := store.Keys()
	if err := rdb.ZAdd(ctx, keys.Deadlines(0), redis.Z{Member: "held", Score: shard.Score(deadline, 0)}).Err(); err != nil {
		t.Fatal(err)
	}
	running.Go(func() { _ = sc.Run(runCtx) })
	if err := sc.SetShards([]int{0}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-fired:
		t.Fatalf("%s fired with the watermark at %d, before its deadline %d", id, t1, deadline)
	case <-time.After(300 * time.Millisecond):
	}
	now := time.Now().UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: now, 1: now}); err != nil {
		t.Fatal(err)
	}
	waitFired(ctx, t, fired, "held", "another instance's raise past a waiting deadline did not reach the gate")

	// Nothing waits any more: the gate idles again.
	for len(advanced) > 0 {
		<-advanced
	}
	time.Sleep(50 * time.Millisecond) // a read begun before the fire may still be in flight
	for len(advanced) > 0 {
		<-advanced
	}
	later := time.Now().UnixMilli() + 1
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: later, 1: later}); err != nil {
		t.Fatal(err)
	}
	quiet("after the deadline fired")
}
