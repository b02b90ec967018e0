package scanner_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/scanner"
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
	return scanner.NewGate(scanner.GateOptions{Store: store, Poll: time.Hour, StallAfter: time.Hour, Log: slog.New(slog.DiscardHandler)}), t0
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

// Before any watermark is known, an instance is starting, not stalled: a
// pass reading the watermarks (Gate.fresh) before the gate's own loop has
// begun, or beside its start, warns of nothing.
func TestGateStartingWithoutWatermarksIsNoStall(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	var warned atomic.Int32
	log := slog.New(countHandler{n: &warned, level: slog.LevelWarn})
	gate := scanner.NewGate(scanner.GateOptions{Store: store, Poll: time.Hour, StallAfter: time.Hour, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := gate.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gate.Run(ctx)
	}()
	for range 20 {
		if err := gate.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	if n := warned.Load(); n != 0 {
		t.Fatalf("%d warnings while starting without a watermark, want none (stall threshold an hour)", n)
	}
}

// countHandler counts the records at level or above.
type countHandler struct {
	n     *atomic.Int32
	level slog.Level
}

func (h countHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h countHandler) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h countHandler) WithGroup(string) slog.Handler                { return h }
