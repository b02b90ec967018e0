package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
		Metrics: metrics.New(metrics.Options{}), Log: slog.New(slog.DiscardHandler)})
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

// Batches are decoded side by side, but reach the writer in the order the
// batcher took them, each with its own records: here a large batch whose
// decoding takes longest, then a batch of one record.
func TestBatchesDecodedSideBySideArriveInOrder(t *testing.T) {
	t.Parallel()
	const big = 4000
	for round := 0; round < 20; round++ {
		chunks, free, prepared := startBatcher(t, big, 3)
		early := records("early", big)
		late := records("late", 1)
		late[0].Time = early[big-1].Time.Add(time.Second)
		chunks <- chunk{partition: 1, msgs: early, next: big, sentMs: time.Now().UnixMilli()}
		chunks <- chunk{partition: 2, msgs: late, next: 1, sentMs: time.Now().UnixMilli()}
		for k, want := range []struct {
			partition, n int
			first        string
		}{{1, big, "early-0"}, {2, 1, "late-0"}} {
			var p *processor
			select {
			case p = <-prepared:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: batch %d never prepared", round, k+1)
			}
			offsets, _ := p.written()
			if len(p.entries) != want.n || p.entries[0].id != want.first || len(offsets) != 1 || offsets[want.partition] != int64(want.n) {
				t.Fatalf("round %d: batch %d holds %d devices from %q, offsets %v; want %d from %q, partition %d up to %d",
					round, k+1, len(p.entries), p.entries[0].id, offsets, want.n, want.first, want.partition, want.n)
			}
			free <- p
		}
	}
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
	sl := copyRecords(records("d", 10), time.Now(), false)
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
		held = append(held, copyRecords(records("x", 10), time.Now(), false))
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

// timed returns n records of partition-keyed ids at offsets from, from+1 …
// whose record times are first, first+step, … ms past base.
func timed(prefix string, from int64, n int, base time.Time, first, step int) []kfetch.Record {
	rs := records(prefix, n)
	for k := range rs {
		rs[k].Offset = from + int64(k)
		rs[k].Time = base.Add(time.Duration(first+k*step) * time.Millisecond)
	}
	return rs
}

// readOrder returns the record times (ms past base) of b in the order a
// processor reads them, checking each chunk is read whole and in order.
func readOrder(t *testing.T, b *batch, base time.Time) []int64 {
	t.Helper()
	read := make([]int, len(b.chunks))
	var out []int64
	for _, k := range b.order {
		c := b.chunks[k]
		if read[k] > 0 && c.msgs[read[k]].Offset != c.msgs[read[k]-1].Offset+1 {
			t.Fatalf("chunk %d read out of offset order", k)
		}
		out = append(out, c.msgs[read[k]].Time.Sub(base).Milliseconds())
		read[k]++
	}
	for k, c := range b.chunks {
		if read[k] != len(c.msgs) {
			t.Fatalf("chunk %d of partition %d: %d of its %d records read", k, c.partition, read[k], len(c.msgs))
		}
	}
	return out
}

// A batch takes the waiting records earliest first across partitions, each
// partition's in offset order; a chunk taken in part ends where its tail
// begins, the tail keeps the chunk's next; a chunk without records goes
// with the first batch.
func TestTakeMergesPartitionsByRecordTime(t *testing.T) {
	t.Parallel()
	base := time.Now()
	w := newWaiting()
	w.add(chunk{partition: 0, msgs: timed("a", 100, 5, base, 0, 2), next: 105})
	w.add(chunk{partition: 0, msgs: timed("a", 105, 5, base, 10, 2), next: 110})
	w.add(chunk{partition: 1, msgs: timed("b", 200, 10, base, 1, 2), next: 215})
	w.add(chunk{partition: 2, next: 50, reset: 1})

	b := w.take(7)
	if got, want := readOrder(t, b, base), []int64{0, 1, 2, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("first batch reads times %v, want %v", got, want)
	}
	next := map[int]int64{}
	for _, c := range b.chunks {
		next[c.partition] = c.next // the last chunk of each partition
	}
	if want := map[int]int64{0: 104, 1: 203, 2: 50}; !maps.Equal(next, want) {
		t.Fatalf("first batch ends partitions at %v, want %v", next, want)
	}
	if w.records != 13 {
		t.Fatalf("%d records wait, want 13", w.records)
	}
	b.reuse()

	b = w.take(100)
	if got, want := readOrder(t, b, base), []int64{7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}; !slices.Equal(got, want) {
		t.Fatalf("second batch reads times %v, want %v", got, want)
	}
	clear(next)
	for _, c := range b.chunks {
		next[c.partition] = c.next
	}
	if want := map[int]int64{0: 110, 1: 215}; !maps.Equal(next, want) {
		t.Fatalf("second batch ends partitions at %v, want %v", next, want)
	}
	if !w.empty() || w.records != 0 {
		t.Fatalf("after both batches %d chunks and %d records wait", w.chunks, w.records)
	}
}

// Through the batcher: a chunk that came while the writer held every
// processor is taken with the one waiting before it, and their devices are
// prepared earliest record first across the two partitions.
func TestBatcherPreparesDevicesInRecordTimeOrder(t *testing.T) {
	t.Parallel()
	chunks, free, prepared := startBatcher(t, 100, 1)
	p := <-free // the writer holds the one processor
	base := time.Now().Add(-time.Minute)
	chunks <- chunk{partition: 0, msgs: timed("p0", 0, 3, base, 10, 20), next: 3} // 10, 30, 50 ms
	chunks <- chunk{partition: 1, msgs: timed("p1", 0, 3, base, 0, 20), next: 3}  // 0, 20, 40 ms
	free <- p
	select {
	case p = <-prepared:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch")
	}
	var ids []string
	for _, e := range p.entries {
		ids = append(ids, e.id)
	}
	if want := []string{"p1-0", "p0-0", "p1-1", "p0-1", "p1-2", "p0-2"}; !slices.Equal(ids, want) {
		t.Fatalf("the batch prepares %v, want %v", ids, want)
	}
	if offsets, _ := p.written(); offsets[0] != 3 || offsets[1] != 3 {
		t.Fatalf("the batch writes partitions up to %v, want 3 and 3", offsets)
	}
}
