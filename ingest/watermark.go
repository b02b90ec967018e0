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

func (p *position) addMark(m mark) {
	p.mu.Lock()
	if len(p.marks) == maxMarks {
		p.marks = append(p.marks[:0], p.marks[1:]...)
	}
	p.marks = append(p.marks, m)
	p.mu.Unlock()
}

// reached drops the marks the written offset has reached and returns the
// latest send time among them (0 if none).
func (p *position) reached(written int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
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
// per partition at a time, and hands them to the local scanners.
func (in *Ingest) raiseLoop(ctx context.Context, r *pendingMax) {
	outage := retry.Outage{Log: in.opts.Log, Down: "raise watermarks"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		wms := r.take()
		if wms == nil {
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
