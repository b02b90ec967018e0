package scanner

import (
	"context"

	"github.com/flatline-dev/flatline/shard"
)

// reenter keeps the devices a hold kept from firing from firing the moment
// it ends (see package storm). When the pipe upstream of the signals topic
// returns, devices come back at their own pace: a device whose deadline fell
// inside a hold, and that was last heard before the hold ended, is given its
// own timeout again from the hold's end. It never fires if it beats within
// that timeout (its heartbeat postpones it further: ZADD GT), and fires no
// later than the hold's end + its timeout if it does not.
//
// It returns the members of batch that fire now; the others are moved to
// their new deadline in Redis, only where their score is unchanged (a
// heartbeat that came meanwhile already moved them later).
func (sc *shardScanner) reenter(ctx context.Context, batch []shard.Member, overrides map[string]int64) ([]shard.Member, error) {
	s := sc.s
	held := s.opts.Gate.endedHolds()
	if s.opts.Timing == nil || len(held) == 0 || len(batch) == 0 {
		return batch, nil
	}
	now := s.opts.Gate.upTo(s.opts.Now())
	var fire, moved []shard.Member
	var to []float64
	for k, m := range batch {
		deadline, timeout := s.opts.Timing(m.ID, m.Score, overrides)
		again := int64(0)
		for _, h := range held {
			if deadline > h.FromMs && deadline-timeout < h.EndMs {
				again = max(again, h.EndMs+timeout)
			}
		}
		if again <= now {
			// Not held, or its timeout from the hold's end has passed too.
			if moved != nil {
				fire = append(fire, m)
			}
			continue
		}
		if moved == nil {
			fire = append(make([]shard.Member, 0, len(batch)), batch[:k]...)
		}
		raw, meta := shard.DecodeScore(m.Score)
		moved = append(moved, m)
		to = append(to, shard.Score(again+(raw-deadline), meta))
	}
	if moved == nil {
		return batch, nil
	}
	if _, err := s.opts.Store.Reenter(ctx, sc.id, moved, to); err != nil {
		return nil, err
	}
	return fire, nil
}
