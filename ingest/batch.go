package ingest

import (
	"context"
	"math"
	"time"
)

// batcher gathers fetched chunks into batches of at most batch_size
// records, prepares each with a free processor and hands it to the writer,
// in order. It holds up to mergeHold records (or a batch, if larger), and a
// batch takes the earliest of them by record time, across partitions (each
// partition's in offset order, see waiting.take).
//
// A batch's records are decoded on a goroutine of their own (decodeAsync),
// several batches side by side, while the batcher goes on taking the next;
// sequence then checks them against the coalescing memory and hands them to
// the writer one after the other, in the order they were taken.
func (in *Ingest) batcher(ctx context.Context, chunks <-chan chunk, free chan *processor, prepared chan<- *processor) {
	size := in.cfg.BatchSize
	decoding := make(chan *processor, cap(free))
	sequenced := make(chan struct{})
	go func() {
		defer close(sequenced)
		sequence(ctx, decoding, prepared)
	}()
	defer func() { <-sequenced }()
	q := newWaiting()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		if q.empty() {
			select {
			case <-ctx.Done():
				return
			case c := <-chunks:
				q.add(c)
			}
		}
		if in.cfg.BatchWait > 0 {
			timer.Reset(in.cfg.BatchWait)
		fill:
			for q.records < size {
				select {
				case c := <-chunks:
					q.add(c)
				case <-timer.C:
					break fill
				case <-ctx.Done():
					return
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		var p *processor
		select {
		case p = <-free:
		case <-ctx.Done():
			return
		}
		// Take what is already queued (what came while the writer was
		// busy too) without waiting longer.
	more:
		for q.records < max(size, mergeHold) {
			select {
			case c := <-chunks:
				q.add(c)
			default:
				break more
			}
		}
		b := q.take(size)
		p.decodeAsync(ctx, b)
		b.reuse()
		select {
		case decoding <- p:
		case <-ctx.Done():
			return
		}
	}
}

// sequence takes the processors in the order the batcher started their
// decoding, waits for each to finish, checks it against the coalescing
// memory (in batch order, as the memory requires: see coalescer) and hands
// it to the writer.
func sequence(ctx context.Context, decoding <-chan *processor, prepared chan<- *processor) {
	for {
		var p *processor
		select {
		case p = <-decoding:
		case <-ctx.Done():
			return
		}
		select {
		case <-p.decoded:
		case <-ctx.Done():
			return
		}
		if p.abandoned {
			return // the generation ended while it waited for the schema registry
		}
		p.coalesce()
		select {
		case prepared <- p:
		case <-ctx.Done():
			return
		}
	}
}

// mergeHold is how many records the batcher holds to choose a batch's from:
// 16 batches at the default ingest.batch_size, one batch at a batch_size
// above it. Reading a backlog, each partition's reader hands on a fetch's
// records a chunk at a time, so the chunks queued in arrival order are
// those of a few partitions, each a fraction of a second of their heartbeats
// at its own place in the backlog: written so, every batch's deadlines land
// all over the last seconds of each shard, and Redis walks its skiplist into
// cold memory for each (the same updates in time order cost it about half;
// docs/performance.md). Taken by record time across the partitions, they land
// near each shard's end. Live, a batch takes all that waits and the order
// only interleaves what arrived together.
const mergeHold = 1 << 16

// waiting holds the chunks the batcher read and no batch took yet, per
// partition in offset order.
type waiting struct {
	parts   map[int][]chunk
	records int // in all chunks
	chunks  int
	// b is the batch take builds, reused, with its heap and cursors.
	b   batch
	h   recordHeap
	cur []cursor
}

func newWaiting() *waiting { return &waiting{parts: make(map[int][]chunk)} }

func (w *waiting) empty() bool { return w.chunks == 0 }

func (w *waiting) add(c chunk) {
	w.parts[c.partition] = append(w.parts[c.partition], c)
	w.records += len(c.msgs)
	w.chunks++
}

// batch is what the batcher hands a processor: chunks, each partition's in
// offset order, and the order to read their records in.
type batch struct {
	chunks []chunk
	// order holds, for each record in the order the batch is read, the
	// index in chunks of the chunk it belongs to; each chunk's records are
	// read in turn.
	order []uint16
}

func (b *batch) reuse() {
	clear(b.chunks)
	b.chunks, b.order = b.chunks[:0], b.order[:0]
}

// take returns a batch of at most size records: repeatedly the waiting
// record with the earliest record time among the partitions' next ones
// (ties: the lower partition). A partition's chunks without records go in
// as soon as they are next: they only move its offset. A chunk taken in
// part is split: its tail, sharing its slab, waits at the partition's head.
func (w *waiting) take(size int) *batch {
	b := &w.b
	h := &w.h
	h.items = h.items[:0]
	// One cursor per partition: its waiting chunks, where its head chunk
	// entered the batch (-1: not yet) and how many of its records are taken.
	cur := w.cur[:0]
	for p, cs := range w.parts {
		cur = append(cur, cursor{part: p, cs: cs, idx: -1})
	}
	w.cur = cur
	for k := range cur {
		w.advance(&cur[k], k)
	}
	for len(b.order) < size && len(h.items) > 0 {
		k := h.pop().cur
		c := &cur[k]
		if c.idx < 0 {
			c.idx = len(b.chunks)
			b.chunks = append(b.chunks, c.cs[0])
		}
		// Take the partition's records up to the next partition's head:
		// a run, one heap operation for all of it.
		msgs := c.cs[0].msgs
		until := int64(math.MaxInt64)
		if len(h.items) > 0 {
			until = h.items[0].t
		}
		for {
			b.order = append(b.order, uint16(c.idx))
			c.taken++
			if c.taken == len(msgs) || len(b.order) == size {
				break
			}
			if t := msgs[c.taken].Time.UnixMilli(); t > until || t == until && c.part > h.items[0].part {
				break
			}
		}
		w.advance(c, k)
	}
	// Cut the heads taken in part: the batch keeps their first records,
	// the tail waits with the rest of the partition.
	for k := range cur {
		c := &cur[k]
		if c.idx >= 0 && c.taken > 0 {
			head := &c.cs[0]
			in := &b.chunks[c.idx]
			in.msgs = head.msgs[:c.taken:c.taken]
			in.next = head.msgs[c.taken].Offset
			head.msgs = head.msgs[c.taken:]
			head.slab.share()
			w.records -= c.taken
		}
		if len(c.cs) == 0 {
			delete(w.parts, c.part)
		} else {
			w.parts[c.part] = c.cs
		}
		c.cs = nil
	}
	return b
}

// cursor is one partition's place in the batch take builds.
type cursor struct {
	part  int
	cs    []chunk // its waiting chunks, the head first
	idx   int     // where the head entered the batch; -1: not yet
	taken int     // the head's records taken
}

// advance moves the cursor past its fully taken head and past chunks
// without records (into the batch: they only move the offset), and pushes
// its next record's time if one is left.
func (w *waiting) advance(c *cursor, k int) {
	b := &w.b
	for len(c.cs) > 0 {
		head := &c.cs[0]
		if c.taken < len(head.msgs) {
			if c.idx >= 0 || len(b.chunks) < maxBatchChunks {
				w.h.push(heapItem{t: head.msgs[c.taken].Time.UnixMilli(), part: c.part, cur: k})
			}
			return
		}
		if c.idx < 0 { // a chunk without records
			b.chunks = append(b.chunks, *head)
		}
		w.records -= c.taken
		w.chunks--
		c.cs[0] = chunk{}
		c.cs = c.cs[1:]
		c.idx, c.taken = -1, 0
	}
}

// maxBatchChunks is the most chunks one batch holds (order names them in
// 16 bits).
const maxBatchChunks = 1 << 16

// recordHeap is a min-heap of the partitions' next record times.
type recordHeap struct{ items []heapItem }

type heapItem struct {
	t    int64
	part int
	cur  int // the partition's cursor in take
}

func (a heapItem) less(b heapItem) bool {
	return a.t < b.t || a.t == b.t && a.part < b.part
}

func (h *recordHeap) push(it heapItem) {
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h.items[i].less(h.items[parent]) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *recordHeap) pop() heapItem {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.items[l].less(h.items[m]) {
			m = l
		}
		if r < last && h.items[r].less(h.items[m]) {
			m = r
		}
		if m == i {
			return top
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}
