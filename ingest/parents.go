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
type parentMemo struct {
	mu      sync.Mutex
	buckets []memoBucket // a power of two of them; none until a parent is recorded
	n       int          // entries
	touched uint64       // what changes read ahead, kept so it is not optimised away
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
// remembered. The batch's buckets are touched first, so that their cache
// misses overlap instead of coming one per look-up in turn (as in
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
		if !e.hasParent || e.tomb {
			continue
		}
		if e.parent != last || lastHash == 0 { // children of one gateway come together
			last, lastHash = e.parent, shard.Hash(e.parent)
		}
		if cur, ok := pm.parentOf(e.h); ok && cur == lastHash && !e.reregister {
			continue
		}
		out = append(out, kinChange{id: e.id, parent: e.parent, h: e.h, ph: lastHash})
	}
	return out
}

// record remembers parent changes Redis acknowledged.
func (pm *parentMemo) record(cs []kinChange) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for _, c := range cs {
		pm.put(c.h, c.ph)
	}
}

// forget drops a deregistered device.
func (pm *parentMemo) forget(id string) {
	pm.mu.Lock()
	pm.drop(shard.Hash(id))
	pm.mu.Unlock()
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
	if len(p.kin) > 0 {
		p.pm.record(p.kin)
	}
	for k := range p.entries {
		if e := &p.entries[k]; e.tomb || e.reregister {
			p.pm.forget(e.id)
		}
	}
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
