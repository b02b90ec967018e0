package ingest

import "context"

// writer writes prepared batches in order, then moves the written offsets,
// the watermarks and the commits on.
func (in *Ingest) writer(ctx context.Context, commits *pendingMax, raises *raiser, pos map[int]*position, free chan<- *processor, prepared <-chan *processor) {
	// Two batches in Redis at once: the next batch's commands go out while
	// Redis still works through the previous one's, so Redis does not sit
	// idle while a reply is read and the next request written. Only
	// batches whose writes commute overlap (see processor.ordered), and
	// what a batch's look at the down sets found is settled after the
	// batch before it is done (shard.Store.WriteAfter); what follows a
	// write — offsets, watermarks, commits, dead letters, recovered
	// events — stays in batch order.
	queue := make(chan *writing, writesInFlight-1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		in.followWrites(ctx, queue, commits, raises, pos, free)
	}()
	var last *writing
	lastKin := make(map[uint64]uint64) // the parent changes last sets
	defer func() {
		close(queue)
		<-finished
		if last != nil {
			<-last.done // no write outlives the generation
		}
	}()
	for {
		var p *processor
		select {
		case p = <-prepared:
		case <-ctx.Done():
			return
		case <-finished:
			return
		}
		w := &writing{p: p, done: make(chan struct{}), ordered: p.ordered()}
		conflict := last != nil && kinConflict(lastKin, p.kin)
		clear(lastKin)
		for _, c := range p.kin {
			lastKin[c.h] = c.ph
		}
		if last != nil && (w.ordered || last.ordered || conflict) {
			select {
			case <-last.done:
			case <-ctx.Done():
				return
			}
		}
		// Queued before it starts: a write starts once the one two back
		// is done, so at most writesInFlight are in Redis.
		select {
		case queue <- w:
		case <-ctx.Done():
			return
		case <-finished:
			return
		}
		p.settleAfter = nil
		if last != nil {
			p.settleAfter = last.done
		}
		go func() {
			defer close(w.done)
			w.err = in.writeRedis(p, ctx)
		}()
		last = w
	}
}

// kinConflict reports whether parent changes cs give a device another
// parent than set does (device hash → parent hash, "" for none): an HSET
// and an HSET or HDEL of one field with other values do not commute. The
// same parent set twice does: a batch names again, before the batch
// ahead of it is acknowledged, what that batch writes.
func kinConflict(set map[uint64]uint64, cs []kinChange) bool {
	if len(set) == 0 {
		return false
	}
	for _, c := range cs {
		if ph, ok := set[c.h]; ok && ph != c.ph {
			return true
		}
	}
	return false
}

// writesInFlight is how many batches the writer has in Redis at once.
const writesInFlight = 2

// writing is a batch on its way to Redis.
type writing struct {
	p       *processor
	ordered bool
	done    chan struct{} // closed when the write ended; err says how
	err     error
}

// followWrites takes the writes in batch order as each is done: it
// finishes the batch (dead letters, recovered events) and moves its
// offsets, watermarks and commits on, until the queue closes or a batch is
// abandoned.
func (in *Ingest) followWrites(ctx context.Context, queue <-chan *writing, commits *pendingMax, raises *raiser, pos map[int]*position, free chan<- *processor) {
	for w := range queue {
		<-w.done
		err := w.err
		if err == nil {
			err = w.p.finish(ctx)
		}
		if err != nil {
			// The generation ended mid-batch: nothing is committed,
			// the partitions' next owner re-reads the batch.
			in.opts.Log.Debug("batch abandoned", "err", err)
			return
		}
		movedOn(w.p, commits, raises, pos)
		free <- w.p
	}
}

// movedOn hands a written batch's offsets and watermarks on. The local
// scanners take the watermarks at once; their raise in Redis and the commit
// follow in the background: the next batch goes to Redis at once.
func movedOn(p *processor, commits *pendingMax, raises *raiser, pos map[int]*position) {
	offsets, wms := p.written()
	for part, off := range offsets {
		t, ok := pos[part].wrote(off, p.resets[part])
		if !ok {
			// Read before the partition's offset was reset: neither its
			// offsets nor its record times say where the partition
			// stands now.
			delete(offsets, part)
			delete(wms, part)
			continue
		}
		if t > wms[part] {
			wms[part] = t
		}
	}
	raises.wrote(wms)
	commits.add(offsets)
}
