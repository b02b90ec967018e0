package scanner

import (
	"context"

	"github.com/flatline-dev/flatline/shard"
)

// copyElsewhere is a device's copy in its other shard of a migrating layout,
// as read when the device was found due.
type copyElsewhere struct {
	shard int
	score float64
}

// resolve applies the two-shard rule of a migrating layout to due members of
// shard id. While previous ≠ 0 a device may have a copy both in its shard
// under the previous count and in its shard under the new count; its
// deadline is the larger score, where a copy that already fired counts with
// the score it fired at (its down score), so the other copy cannot fire the
// same silence again. A copy that is not the larger one is stale:
// it is dropped (conditionally) and never fires. On a tie only the copy in
// the device's new home fires. The returned map holds, for each member that
// fires, the other copy to remove once Kafka acknowledged the event.
//
// The reads are not atomic with the writes of ingest, and need not be: a
// member fires only when the watermark has passed its deadline, so every
// heartbeat that could postpone it has already been written to one of the
// two shards before this read.
func (sc *shardScanner) resolve(ctx context.Context, l shard.Layout, due []shard.Member) ([]shard.Member, map[string]copyElsewhere, error) {
	var ids []string
	var shards []int
	var idx []int
	for k, m := range due {
		h := shard.Hash(m.ID)
		home := l.ShardOf(h)
		prev := shard.Of(h, l.Previous)
		other := home
		if home == sc.id {
			other = prev
		}
		if other == sc.id {
			continue // only one place this device can be
		}
		ids = append(ids, m.ID)
		shards = append(shards, other)
		idx = append(idx, k)
	}
	if len(ids) == 0 {
		return due, nil, nil
	}
	copies, err := sc.s.opts.Store.Copies(ctx, shards, ids)
	if err != nil {
		return nil, nil, err
	}
	stale := make(map[int]bool)
	var others map[string]copyElsewhere
	for j, k := range idx {
		c, m := copies[j], due[k]
		home := l.ShardOf(shard.Hash(m.ID))
		switch {
		case c.HasDown && c.Down >= m.Score:
			// The other copy already fired this silence (or a later one).
			stale[k] = true
		case c.HasLive && (c.Live > m.Score || (c.Live == m.Score && home != sc.id)):
			// The other copy is later; on a tie the new home fires.
			stale[k] = true
		case c.HasLive:
			if others == nil {
				others = make(map[string]copyElsewhere)
			}
			others[m.ID] = copyElsewhere{shard: shards[j], score: c.Live}
		}
	}
	if len(stale) == 0 {
		return due, others, nil
	}
	fire := make([]shard.Member, 0, len(due)-len(stale))
	drop := make([]shard.Member, 0, len(stale))
	for k, m := range due {
		if stale[k] {
			drop = append(drop, m)
		} else {
			fire = append(fire, m)
		}
	}
	removed, err := sc.s.opts.Store.RemoveIf(ctx, sc.id, drop)
	if err != nil {
		return nil, nil, err
	}
	if sc.s.opts.Metrics != nil {
		sc.s.opts.Metrics.StaleDropped.Add(float64(len(removed)))
	}
	return fire, others, nil
}

// removeOthers drops the other copies of fired devices, each only if it is
// still the copy that was read.
func (sc *shardScanner) removeOthers(ctx context.Context, others map[string]copyElsewhere) error {
	byShard := make(map[int][]shard.Member)
	for id, c := range others {
		byShard[c.shard] = append(byShard[c.shard], shard.Member{ID: id, Score: c.score})
	}
	for i, ms := range byShard {
		if _, err := sc.s.opts.Store.RemoveIf(ctx, i, ms); err != nil {
			return err
		}
	}
	return nil
}
