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
// Why it is safe. Only writes Redis acknowledged are remembered (finish
// runs after Store.Write succeeded); a batch that names a parent not yet
// remembered writes it, so a lost memory costs a write, never a parent.
// A batch with parent changes is ordered (processor.ordered): an HSET and
// an HDEL of one device do not commute. A rebalance or a restart starts
// with an empty memory (one per generation), so a parent another owner
// changed meanwhile is written again. A tombstone forgets the device: its
// deregistration deletes the parent in Redis too.
type parentMemo struct {
	mu sync.Mutex
	m  map[string]string
}

// parentMemoMax bounds the memory: when full it starts afresh.
const parentMemoMax = 1 << 20

func newParentMemo() *parentMemo { return &parentMemo{m: make(map[string]string)} }

// kinChange is a parent change of a batch: device id names parent, ""
// for none.
type kinChange struct {
	id, parent string
}

// changes appends to out the entries whose parent differs from the one
// remembered.
func (pm *parentMemo) changes(entries []entry, out []kinChange) []kinChange {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	for k := range entries {
		e := &entries[k]
		if !e.hasParent || e.tomb {
			continue
		}
		if cur, ok := pm.m[e.id]; ok && cur == e.parent && !e.reregister {
			continue
		}
		out = append(out, kinChange{id: e.id, parent: e.parent})
	}
	return out
}

// record remembers parent changes Redis acknowledged.
func (pm *parentMemo) record(cs []kinChange) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if len(pm.m)+len(cs) > parentMemoMax {
		clear(pm.m)
	}
	for _, c := range cs {
		pm.m[c.id] = c.parent
	}
}

// forget drops a deregistered device.
func (pm *parentMemo) forget(id string) {
	pm.mu.Lock()
	delete(pm.m, id)
	pm.mu.Unlock()
}

// routeKin adds the batch's parent changes to its Redis batch under layout
// l: each in its child's shard (and, while l migrates, a removal in the
// child's previous shard, where an older parent may still be), the parent
// marked as one in its own shard.
func (p *processor) routeKin(l shard.Layout) {
	for _, c := range p.kin {
		h := shard.Hash(c.id)
		i, pi := l.ShardOf(h), 0
		if c.parent != "" {
			pi = l.ShardOf(shard.Hash(c.parent))
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
