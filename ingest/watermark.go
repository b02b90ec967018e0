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

// raiseLoop raises the watermarks of written batches in Redis, the newest
// per partition at a time, and hands them to the local scanners. None goes
// past confirmed, the latest moment the prober confirmed the signals
// topic's partition count for (see probe), nor past what the storm guard
// allows (stall.go).
func (in *Ingest) raiseLoop(ctx context.Context, r *pendingMax, confirmed *atomic.Int64, guard *stallGuard) {
	outage := retry.Outage{Log: in.opts.Log, Down: "raise watermarks"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		wms := r.take()
		capAt(wms, confirmed.Load())
		guard.capAt(wms)
		if len(wms) == 0 {
			continue
		}
		if err := in.opts.Store.RaiseWatermarks(ctx, 0, wms); err != nil {
			if ctx.Err() != nil {
				return
			}
			outage.Failed(err)
			// Kept for the next try, which takes the newer ones with it.
			r.add(wms)
			if !retry.Sleep(ctx, raiseRetry) {
				return
			}
			continue
		}
		outage.Succeeded()
		if in.opts.Raised != nil {
			in.opts.Raised(wms)
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
