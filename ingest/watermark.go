package ingest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
)

// position tracks, per partition, the next offset not yet written to Redis.
type position struct {
	written atomic.Int64
	// resetting is the number of the reader's last out-of-range reset
	// while the batch that carries it is not yet written, else 0. Until
	// then written is where the partition was read, not where it is read.
	resetting atomic.Uint64

	// marks are high-water-mark probes that found the partition not yet
	// fully written: once the written offset reaches a mark's offset, every
	// record appended before the probe was sent is in Redis, so the
	// partition's watermark can move to the probe's send time.
	mu    sync.Mutex
	marks []mark
}

type mark struct {
	sentMs, offset int64
}

// maxMarks bounds the pending probes per partition (the newest are kept).
const maxMarks = 256

// moving reports whether the reader moved off an out-of-range offset and
// the batch that says so is not written yet: written is then where the
// partition was read, not where it is read.
func (p *position) moving() bool { return p.resetting.Load() != 0 }

func (p *position) addMark(m mark) {
	p.mu.Lock()
	if len(p.marks) == maxMarks {
		p.marks = append(p.marks[:0], p.marks[1:]...)
	}
	p.marks = append(p.marks, m)
	p.mu.Unlock()
}

// beginReset records the reader's reset number n: the batches read before
// it move neither the written offset nor the watermark, and the marks taken
// at the old offsets go.
func (p *position) beginReset(n uint64) {
	p.mu.Lock()
	p.resetting.Store(n)
	p.marks = p.marks[:0]
	p.mu.Unlock()
}

// wrote moves the written offset to off once a batch is written, reset
// being the reset number it carries for the partition (0: none). It returns
// the latest send time among the marks off reached (0 if none), and false
// for a batch read before a reset still under way, whose offsets no longer
// say where the partition is read.
func (p *position) wrote(off int64, reset uint64) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.resetting.Load(); cur != 0 {
		if reset != cur {
			return 0, false
		}
		p.resetting.Store(0)
	}
	p.written.Store(off)
	return p.reached(off), true
}

// reached drops the marks the written offset has reached and returns the
// latest send time among them (0 if none). p.mu is held.
func (p *position) reached(written int64) int64 {
	var t int64
	k := 0
	for k < len(p.marks) && p.marks[k].offset <= written {
		t = p.marks[k].sentMs
		k++
	}
	p.marks = append(p.marks[:0], p.marks[k:]...)
	return t
}

// raiser carries the watermarks of written batches on: to this process's
// scanners as soon as each batch is written (Options.Raised), and to Redis,
// where the other instances' gates and the partitions' next owner read
// them, in the background (run). A watermark says which records are in
// Redis, and a written batch's are: so the local hand-over does not wait
// for the raise in Redis. Raised only after it, each local watermark was
// late by a round trip to Redis, and by more while the raise of the batch
// before was still out (one raise at a time), which on a busy machine,
// under load, came to tens of milliseconds. None goes past confirmed, the
// latest moment the prober confirmed the signals topic's partition count
// for (see probe), nor past what the storm guard allows (stall.go), here
// or in Redis.
type raiser struct {
	in        *Ingest
	pending   *pendingMax
	confirmed *atomic.Int64
	guard     *stallGuard
	local     map[int]int64 // wrote's, reused: Raised does not keep it
}

func newRaiser(in *Ingest, confirmed *atomic.Int64, guard *stallGuard) *raiser {
	return &raiser{in: in, pending: newPendingMax(), confirmed: confirmed, guard: guard, local: make(map[int]int64)}
}

// wrote takes the watermark candidates of a batch just written. Only the
// writer calls it, one batch after the other.
func (r *raiser) wrote(wms map[int]int64) {
	if h := r.in.opts.Raised; h != nil {
		clear(r.local)
		for p, v := range wms {
			r.local[p] = v
		}
		capAt(r.local, r.confirmed.Load())
		r.guard.capAt(r.local)
		if len(r.local) > 0 {
			h(r.local)
		}
	}
	r.pending.add(wms)
}

// run raises the watermarks of written batches in Redis, the newest per
// partition at a time, until ctx ends.
func (r *raiser) run(ctx context.Context) {
	in := r.in
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pending.wake:
		}
		wms := r.pending.take()
		capAt(wms, r.confirmed.Load())
		r.guard.capAt(wms)
		if len(wms) == 0 {
			continue
		}
		// A failure is logged by the link, with the writes'.
		if err := in.link.attempt(ctx, "watermarks", func(ctx context.Context) error {
			return in.opts.Store.RaiseWatermarks(ctx, 0, wms)
		}); err != nil {
			if ctx.Err() != nil {
				return
			}
			// Kept for the next try, which takes the newer ones with it.
			r.pending.add(wms)
			if !retry.Sleep(ctx, raiseRetry) {
				return
			}
			continue
		}
	}
}

// raiseRetry is the wait after a failed raise. The batches behind it keep
// being written meanwhile, so a retry carries the newest watermarks.
const raiseRetry = 20 * time.Millisecond

// capAt lowers every watermark in wms to at most limit; with no limit yet
// (0) none is kept.
func capAt(wms map[int]int64, limit int64) {
	for p, v := range wms {
		switch {
		case limit == 0:
			delete(wms, p)
		case v > limit:
			wms[p] = limit
		}
	}
}
