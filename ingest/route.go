package ingest

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// ordered reports whether the batch must reach Redis after the batch before
// it and before the batch after it: its tombstones and override timeouts
// are not commutative (a ZADD GT is: the later deadline wins whichever
// write lands first). Parent changes are, unless two batches give one
// device different parents (kinConflict).
func (p *processor) ordered() bool {
	for k := range p.entries {
		if e := &p.entries[k]; e.tomb || e.reregister || e.override > 0 {
			return true
		}
	}
	return false
}

// route fills p.batch from the batch's entries under layout l and returns
// the number of deadline writes.
func (p *processor) route(l shard.Layout) int {
	b := &p.batch
	b.Reset(l.Shards())
	writes := 0
	for k := range p.entries {
		e := &p.entries[k]
		h := e.h
		i := l.ShardOf(h)
		if e.tomb {
			b.Forget(i, e.id)
			if prev, moved := l.PreviousOf(h); moved {
				b.Forget(prev, e.id)
			}
			continue
		}
		prev, moved := l.PreviousOf(h)
		switch {
		case e.reregister:
			b.Reregister(i, e.id, e.score, e.override)
			if moved {
				b.Forget(prev, e.id)
			}
		case moved:
			b.AddMoved(i, prev, e.id, e.score, e.override)
		default:
			b.Add(i, e.id, e.score, e.override)
		}
		writes++
	}
	p.routeKin(l)
	return writes
}

// writeRedis writes the batch's deadlines, retrying until it is written or
// ctx ends. The recoveries it found wait in p.back for finish.
func (p *processor) writeRedis(ctx context.Context) error {
	in := p.in
	m := in.opts.Metrics
	start := time.Now()
	// Route the whole batch by one layout, taken again at every attempt so a
	// batch retried across a layout change never writes by a stale one.
	writes := 0
	var back []shard.Recovered
	err := p.retryRedis(ctx, func(ctx context.Context) error {
		writes = p.route(in.opts.Layout.Current())
		got, err := in.opts.Store.WriteAfter(ctx, &p.batch, p.settleAfter)
		// An attempt that fails after it settled recoveries (the replicas
		// did not confirm it: redis.wait_replicas) took their down entries
		// away, so the next attempt does not find them again: they are
		// kept from the attempt that found them.
		back = appendRecovered(back, got)
		return err
	})
	p.back = back
	if err != nil {
		return err
	}
	if writes > 0 {
		m.RedisWrites.Add(float64(writes))
		m.RedisBatches.Inc()
	}
	m.IngestWrite.Observe(time.Since(start).Seconds())
	if !p.answered.IsZero() {
		m.IngestQueue.Observe(start.Sub(p.answered).Seconds())
	}
	return nil
}

// appendRecovered appends to back the recoveries of got whose device it
// does not hold yet: an attempt after a failover may find a recovery again
// that an earlier attempt settled on the master that went away.
func appendRecovered(back, got []shard.Recovered) []shard.Recovered {
	if len(back) == 0 || len(got) == 0 {
		return append(back, got...) // every attempt but a retried one
	}
	have := make(map[string]bool, len(back))
	for _, r := range back {
		have[r.ID] = true
	}
	for _, r := range got {
		if !have[r.ID] {
			back = append(back, r)
		}
	}
	return back
}
