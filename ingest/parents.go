package ingest

import (
	"context"
	"sync"

	"github.com/flatline-dev/flatline/shard"
)

// parentMemo remembers, per device that named a gateway (SPEC §14), the
// parent this generation last wrote for it, so a parent is written only
// when it changes: every heartbeat of a child repeats its parent, and a
// fleet without parents never reaches it.
//
// It is a set-associative table of routing hashes (shard.Hash), not a map
// of ids: a child's look-up is one cache line, where a map of hundreds of
// thousands of ids costs about two cache misses and a string compare, and
// the table holds no pointer for the collector to scan. A device is told
// by its whole 64-bit hash: two devices of one fleet sharing one is as
// unlikely as a lost write. The table doubles before it is half full: hashes
// fall into buckets unevenly (a Poisson spread), and a bucket of four ways
// at three devices a bucket on average overflowed for a third of a 200,000
// device fleet, which then wrote its parents with every batch. A full
// bucket forgets one entry, picked by the newcomer's hash rather than the
// oldest, so devices taking turns in an overfull bucket do not push each
// other out every time; a forgotten child writes its parent once more.
//
// Why it is safe. Only writes Redis acknowledged are remembered (finish
// runs after Store.Write succeeded); a batch that names a parent not yet
// remembered writes it, so a lost memory costs a write, never a parent.
// Two batches giving one device different parents are written in order
// (kinConflict): an HSET and an HDEL of one device do not commute. A rebalance or a restart starts
// with an empty memory (one per generation), so a parent another owner
// changed meanwhile is written again. A tombstone forgets the device: its
// deregistration deletes the parent in Redis too.
//
// A batch is prepared while the batches ahead of it are still being
// written, before the memory holds what they set. So what they set is kept
// aside until they are written (pending), and a batch compares its parents
// with that first: a device that moves to another gateway and back, or is
// deregistered and beats again naming its old gateway, across batches in
// flight, has its latest parent written, not skipped as already there.
type parentMemo struct {
	mu      sync.Mutex
	buckets []memoBucket // a power of two of them; none until a parent is recorded
	n       int          // entries
	touched uint64       // what changes read ahead, kept so it is not optimised away
	// pending holds, per device hash, what the batches prepared and not
	// yet written set for it, the latest of them winning.
	pending map[uint64]pendingKin
}

// pendingKin is what batches in flight set for a device: its parent's hash
// (gone: deregistered), and how many of their changes are not yet written.
type pendingKin struct {
	parent uint64
	gone   bool
	n      int
}

// memoBucket is two cache lines: eight devices' hashes and their parents',
// filled from the front, so most look-ups read the first line alone.
// A device hash of 0 marks an empty slot (a device hashing to 0 is just
// never remembered).
type memoBucket [memoWays]struct{ dev, parent uint64 }

const (
	memoWayBits = 3
	memoWays    = 1 << memoWayBits
	// The table starts at minMemoBuckets and doubles once it holds
	// memoLoad entries a bucket, up to maxMemoBuckets (128 MiB, 3 M
	// children at memoLoad, 8 M full). At memoLoad a bucket is full for
	// about 0.4 % of devices.
	memoLoad       = 3
	minMemoBuckets = 1 << 11
	maxMemoBuckets = 1 << 20
)

func newParentMemo() *parentMemo { return &parentMemo{} }

// bucket is where device hash h lives: its low bits pick it.
func (pm *parentMemo) bucket(h uint64) *memoBucket {
	return &pm.buckets[h&uint64(len(pm.buckets)-1)]
}

// parentOf returns the parent hash remembered for device hash h.
func (pm *parentMemo) parentOf(h uint64) (uint64, bool) {
	if len(pm.buckets) == 0 || h == 0 {
		return 0, false
	}
	b := pm.bucket(h)
	for w := range b {
		switch b[w].dev {
		case h:
			return b[w].parent, true
		case 0:
			// Filled from the front (put, drop): none further on. A
			// device not remembered reads one cache line, not two.
			return 0, false
		}
	}
	return 0, false
}

// put remembers parent hash ph for device hash h.
func (pm *parentMemo) put(h, ph uint64) {
	if h == 0 {
		return
	}
	if len(pm.buckets) == 0 || (pm.n >= memoLoad*len(pm.buckets) && len(pm.buckets) < maxMemoBuckets) {
		pm.grow()
	}
	b := pm.bucket(h)
	for w := range b {
		if b[w].dev == h || b[w].dev == 0 {
			if b[w].dev == 0 {
				pm.n++
			}
			b[w].dev, b[w].parent = h, ph
			return
		}
	}
	// Full: the way the newcomer's high bits name goes (the low bits
	// picked the bucket).
	w := h >> (64 - memoWayBits)
	b[w].dev, b[w].parent = h, ph
}

// grow doubles the table (or makes the first one), keeping its entries.
func (pm *parentMemo) grow() {
	old := pm.buckets
	pm.buckets, pm.n = make([]memoBucket, max(2*len(old), minMemoBuckets)), 0
	for k := range old {
		for _, e := range old[k] {
			if e.dev != 0 {
				pm.put(e.dev, e.parent)
			}
		}
	}
}

// drop forgets device hash h.
func (pm *parentMemo) drop(h uint64) {
	if len(pm.buckets) == 0 || h == 0 {
		return
	}
	b := pm.bucket(h)
	for w := range b {
		if b[w].dev == h {
			copy(b[w:], b[w+1:])
			b[memoWays-1].dev, b[memoWays-1].parent = 0, 0
			pm.n--
			return
		}
	}
}

// kinChange is a parent change of a batch: device id names parent, ""
// for none; h and ph are their hashes.
type kinChange struct {
	id, parent string
	h, ph      uint64
}

// changes appends to out the entries whose parent differs from the one
// remembered, or set by a batch ahead not yet written, and sets aside what
// the batch sets (its changes, its deregistrations) until written takes
// it. The batch's buckets are touched first, so that their cache misses
// overlap instead of coming one per look-up in turn (as in
// coalescer.filter).
func (pm *parentMemo) changes(entries []entry, out []kinChange) []kinChange {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if len(pm.buckets) > 0 {
		var touched uint64
		for k := range entries {
			touched += pm.bucket(entries[k].h)[0].dev
		}
		pm.touched = touched
	}
	var last string
	var lastHash uint64
	for k := range entries {
		e := &entries[k]
		if e.tomb || e.reregister {
			pm.pend(e.h, pendingKin{gone: true})
		}
		if !e.hasParent || e.tomb {
			continue
		}
		if e.parent != last || lastHash == 0 { // children of one gateway come together
			last, lastHash = e.parent, shard.Hash(e.parent)
		}
		if cur, ok := pm.current(e.h); ok && cur == lastHash && !e.reregister {
			continue
		}
		out = append(out, kinChange{id: e.id, parent: e.parent, h: e.h, ph: lastHash})
		pm.pend(e.h, pendingKin{parent: lastHash})
	}
	return out
}

// active reports whether the memory holds a parent, or a batch's change in
// flight: a fleet that never named a parent never goes further.
func (pm *parentMemo) active() bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	return pm.n > 0 || len(pm.pending) > 0
}

// current returns the parent hash device hash h has once the batches in
// flight are written: the latest they set, else the one remembered.
func (pm *parentMemo) current(h uint64) (uint64, bool) {
	if p, ok := pm.pending[h]; ok {
		return p.parent, !p.gone
	}
	return pm.parentOf(h)
}

// pend sets aside what a batch in flight sets for device hash h.
func (pm *parentMemo) pend(h uint64, p pendingKin) {
	if pm.pending == nil {
		pm.pending = make(map[uint64]pendingKin)
	}
	p.n = pm.pending[h].n + 1
	pm.pending[h] = p
}

// settle takes one change set aside for device hash h as written.
func (pm *parentMemo) settle(h uint64) {
	p, ok := pm.pending[h]
	switch {
	case !ok:
	case p.n <= 1:
		delete(pm.pending, h)
	default:
		p.n--
		pm.pending[h] = p
	}
}

// written takes a batch Redis acknowledged: it remembers its parent
// changes cs and forgets its deregistered devices (among entries), and,
// when changes set them aside (pended), settles them.
func (pm *parentMemo) written(cs []kinChange, entries []entry, pended bool) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for _, c := range cs {
		pm.put(c.h, c.ph)
		if pended {
			pm.settle(c.h)
		}
	}
	for k := range entries {
		if e := &entries[k]; e.tomb || e.reregister {
			pm.drop(e.h)
			if pended {
				pm.settle(e.h)
			}
		}
	}
}

// routeKin adds the batch's parent changes to its Redis batch under layout
// l: each in its child's shard (and, while l migrates, a removal in the
// child's previous shard, where an older parent may still be), the parent
// marked as one in its own shard.
func (p *processor) routeKin(l shard.Layout) {
	for _, c := range p.kin {
		h := c.h
		i, pi := l.ShardOf(h), 0
		if c.parent != "" {
			pi = l.ShardOf(c.ph)
		}
		p.batch.SetParent(i, c.id, c.parent, pi)
		if prev, moved := l.PreviousOf(h); moved {
			p.batch.SetParent(prev, c.id, "", 0)
		}
	}
}

// recordKin, once the batch is written, remembers its parent changes and
// forgets its deregistered devices.
func (p *processor) recordKin() {
	if p.pm == nil {
		return // a processor of a test, built without a generation
	}
	p.pm.written(p.kin, p.entries, p.pended)
}

// returnOrphans gives the children waiting for a parent of back (held
// while it was silent, or left unreachable while it was down) their own
// timeout again from the parent's return (SPEC §14): a child that does
// not beat by then is known dead and times out. Retried like the batch's
// write: the batch's offsets wait for it.
func (p *processor) returnOrphans(ctx context.Context, back []shard.Recovered) error {
	rs := make([]shard.Return, 0, len(back))
	seen := make(map[string]bool, len(back))
	for _, r := range back {
		if seen[r.ID] {
			continue // back from a timeout and awaited: one return
		}
		seen[r.ID] = true
		rs = append(rs, shard.Return{ID: r.ID, SeenAtMs: p.entries[p.latest[r.ID]].atMs})
	}
	return p.retryRedis(ctx, func(ctx context.Context) error {
		_, err := p.in.opts.Store.ReturnOrphans(ctx, p.in.opts.Layout.Current(), rs)
		return err
	})
}
