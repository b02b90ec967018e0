package scanner_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/scanner"
)

// Watermarks this process's ingest hands over (Gate.Raised) move the gate
// at once, between polls; the minimum still counts every partition.
func TestGateTakesLocalRaisesBetweenPolls(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: t0, 1: t0}); err != nil {
		t.Fatal(err)
	}
	gate := scanner.NewGate(store, time.Hour, 0, time.Hour, slog.New(slog.DiscardHandler))
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
