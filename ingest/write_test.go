package ingest

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
)

// The writer has two batches in Redis at once only when their writes
// commute: a batch with a tombstone or an override timeout waits for the
// one before it, and the one after it waits for it. What follows a write
// stays in batch order.
func TestWriterOverlapsOnlyCommutingBatches(t *testing.T) {
	t.Parallel()
	kinds := []string{"plain", "plain", "plain", "tomb", "plain", "override", "override", "plain", "tomb", "plain", "plain", "plain"}
	in := &Ingest{opts: Options{Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(metrics.Options{})}}
	ps := make([]*processor, len(kinds))
	for n, kind := range kinds {
		p := &processor{in: in, offsets: map[int]int64{0: int64(n + 1)}, wms: map[int]int64{}}
		e := entry{id: "d", score: 1}
		switch kind {
		case "tomb":
			e = entry{id: "d", tomb: true}
		case "override":
			e.override = 30_000
		}
		p.entries = append(p.entries, e)
		ps[n] = p
	}
	index := func(p *processor) int { return int(p.offsets[0]) - 1 }

	var mu sync.Mutex
	running := map[int]bool{}
	started := make([]chan struct{}, len(kinds))
	for n := range started {
		started[n] = make(chan struct{})
	}
	in.writeRedis = func(p *processor, ctx context.Context) error {
		n := index(p)
		mu.Lock()
		for o := range running {
			if kinds[n] != "plain" || kinds[o] != "plain" {
				t.Errorf("batch %d (%s) written while batch %d (%s) was", n, kinds[n], o, kinds[o])
			}
		}
		running[n] = true
		mu.Unlock()
		close(started[n])
		// A plain batch followed by a plain one is still in Redis when
		// the next starts: the writer does not wait for it.
		if n+1 < len(kinds) && kinds[n] == "plain" && kinds[n+1] == "plain" {
			select {
			case <-started[n+1]:
			case <-time.After(10 * time.Second):
				t.Errorf("batch %d (plain) not started while batch %d (plain) was in Redis", n+1, n)
			}
		} else {
			time.Sleep(20 * time.Millisecond) // room for a wrong overlap to show
		}
		mu.Lock()
		delete(running, n)
		mu.Unlock()
		return nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	free := make(chan *processor, len(ps))
	prepared := make(chan *processor, len(ps))
	for _, p := range ps {
		prepared <- p
	}
	commits, raises := newPendingMax(), newRaiser(in, new(atomic.Int64), nil)
	done := make(chan struct{})
	go func() { defer close(done); in.writer(ctx, commits, raises, map[int]*position{0: {}}, free, prepared) }()
	for n := range ps {
		select {
		case p := <-free:
			if got := index(p); got != n {
				t.Fatalf("batch %d finished as number %d; want batch order", got, n)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("batch %d never finished", n)
		}
	}
	if got := commits.take()[0]; got != int64(len(ps)) {
		t.Errorf("committed offset %d, want %d", got, len(ps))
	}
	cancel()
	<-done
}
