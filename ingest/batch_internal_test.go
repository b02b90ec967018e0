package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/timeouts"
)

// startBatcher runs an Ingest's batcher alone, with batches of batchSize
// records and procs processors, free at first; it stops with the test.
func startBatcher(t *testing.T, batchSize, procs int) (chunks chan chunk, free, prepared chan *processor) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BatchSize = batchSize
	kc := kafkaconn.DefaultConfig()
	kc.DeadLetterTopic = ""
	in, err := New(cfg, Options{Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Kafka: kc,
		Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	chunks, free, prepared = make(chan chunk, 1), make(chan *processor, procs), make(chan *processor, procs)
	for _, p := range newProcessors(in, procs) {
		free <- p
	}
	go in.batcher(ctx, chunks, free, prepared)
	return chunks, free, prepared
}

// records returns n records at offsets 0 … n-1 keyed prefix-0 … with empty
// JSON values.
func records(prefix string, n int) []kfetch.Record {
	rs := make([]kfetch.Record, n)
	for k := range rs {
		rs[k] = kfetch.Record{Offset: int64(k), Time: time.Now(), Key: []byte(fmt.Sprintf("%s-%d", prefix, k)), Value: []byte(`{}`)}
	}
	return rs
}

// A chunk split at a batch's end hands its next offset — past what its
// fetch skipped (transaction markers, aborted records) — to its tail, and
// its head ends where the tail begins: each batch's written offset is
// exactly past what it holds, and the last reaches past the skipped ones.
func TestSplitChunkKeepsItsNextOffset(t *testing.T) {
	t.Parallel()
	chunks, _, prepared := startBatcher(t, 7, 3)
	msgs := records("d", 10)
	chunks <- chunk{partition: 3, msgs: msgs, next: 20, sentMs: time.Now().UnixMilli()}
	for _, want := range []int64{7, 20} {
		select {
		case p := <-prepared:
			offsets, _ := p.written()
			if offsets[3] != want {
				t.Errorf("batch written up to offset %d, want %d", offsets[3], want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no batch")
		}
	}
}

// A chunk's records live in a pooled slab. When the batcher splits a chunk
// at a batch's end, its tail still reads the slab after the head's batch is
// prepared and has let go of it: the slab must not go back to the pool
// until the tail is prepared too, or the next chunks copied would overwrite
// the tail's keys.
func TestSplitChunkKeepsItsSlab(t *testing.T) {
	t.Parallel()
	// One processor: the batcher waits for it before it prepares the tail.
	chunks, free, prepared := startBatcher(t, 7, 1)
	sl := copyRecords(records("d", 10), time.Now())
	chunks <- chunk{partition: 3, msgs: sl.recs, slab: sl, next: 10, sentMs: time.Now().UnixMilli()}
	ids := func(p *processor) []string {
		var out []string
		for _, e := range p.entries {
			out = append(out, e.id)
		}
		return out
	}
	var p *processor
	select {
	case p = <-prepared:
	case <-time.After(10 * time.Second):
		t.Fatal("no first batch")
	}
	if got := ids(p); len(got) != 7 || got[0] != "d-0" || got[6] != "d-6" {
		t.Fatalf("first batch holds %v, want d-0 … d-6", got)
	}
	// Churn the pool while the tail waits: a slab put back too early is
	// taken and overwritten here.
	var held []*slab
	for range 8 {
		held = append(held, copyRecords(records("x", 10), time.Now()))
	}
	free <- p
	select {
	case p = <-prepared:
	case <-time.After(10 * time.Second):
		t.Fatal("no second batch")
	}
	if got := ids(p); len(got) != 3 || got[0] != "d-7" || got[2] != "d-9" {
		t.Fatalf("the split chunk's tail holds %v, want d-7 … d-9", got)
	}
	for _, s := range held {
		s.release()
	}
}
