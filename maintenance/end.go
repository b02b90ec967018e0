package maintenance

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// Settle is how long End waits, after marking a window ended, before it
// looks again for devices the window parked: an instance that had not yet
// reloaded the windows (DefaultPoll) may have parked one meanwhile.
const Settle = 4 * DefaultPoll

// End ends window id now and brings every device it parked back from the
// window's planned end to the actual end + the device's own timeout,
// where it fires a timeout carrying the window's id if it stays silent. A
// device also in another open window is parked again by that one when this
// deadline passes. It returns the ended window and how many devices it
// released. sleep waits d unless ctx ends first, and reports whether it
// did (retry.Sleep); nil skips the second look.
func End(ctx context.Context, st *shard.Store, id string, now time.Time, sleep func(ctx context.Context, d time.Duration) bool) (shard.Window, int, error) {
	w, err := st.EndWindow(ctx, id, now.UnixMilli())
	if err != nil {
		return shard.Window{}, 0, err
	}
	n, err := release(ctx, st, w)
	if err != nil || sleep == nil {
		return w, n, err
	}
	if !sleep(ctx, Settle) {
		return w, n, ctx.Err()
	}
	m, err := release(ctx, st, w)
	return w, n + m, err
}

// release moves the devices w parked, in every shard, to w's end + their
// timeout, and wakes the scanners of the shards it changed.
func release(ctx context.Context, st *shard.Store, w shard.Window) (int, error) {
	l, ok, err := st.Layout(ctx)
	if err != nil || !ok {
		return 0, err
	}
	total := 0
	var woken []int
	for i := 0; i < l.Shards(); i++ {
		ids, recs, err := st.ParkedBy(ctx, i, w.ID)
		if err != nil {
			return total, err
		}
		moves := make([]shard.HeldMove, len(ids))
		for k, id := range ids {
			moves[k] = shard.HeldMove{ID: id, From: recs[k].Score, Record: shard.HeldRecord{
				Stage: shard.HeldReleased, Score: moveDeadline(recs[k].Score, w.UntilMs, w.EndMs()+recs[k].TimeoutMs),
				TimeoutMs: recs[k].TimeoutMs, Window: w.ID}}
		}
		n, err := st.MoveHeld(ctx, i, moves)
		if err != nil {
			return total, err
		}
		if n > 0 {
			total += n
			woken = append(woken, i)
		}
		moved, shards, err := followed(ctx, st, l, i, moves)
		if err != nil {
			return total, err
		}
		total += moved
		woken = append(woken, shards...)
	}
	if len(woken) > 0 {
		return total, st.PublishWakes(ctx, woken)
	}
	return total, nil
}

// followed applies the moves of shard i's records to the devices' shards
// under layout l, where they differ: a doubling or a halving moved the
// device and left its record behind. Each move is conditional on the
// device's score, so a device still in shard i (moved already) is not
// moved twice.
func followed(ctx context.Context, st *shard.Store, l shard.Layout, i int, moves []shard.HeldMove) (int, []int, error) {
	byShard := make(map[int][]shard.HeldMove)
	for _, m := range moves {
		if home := l.ShardOf(shard.Hash(m.ID)); home != i {
			byShard[home] = append(byShard[home], m)
		}
	}
	total := 0
	var woken []int
	for j, ms := range byShard {
		n, err := st.MoveHeld(ctx, j, ms)
		if err != nil {
			return total, woken, err
		}
		if n > 0 {
			total += n
			woken = append(woken, j)
		}
	}
	return total, woken, nil
}

// moveDeadline returns score with its deadline moved from fromMs to toMs,
// keeping its meta and any coalescing pad on top of the deadline.
func moveDeadline(score float64, fromMs, toMs int64) float64 {
	raw, meta := shard.DecodeScore(score)
	return shard.Score(raw+(toMs-fromMs), meta)
}
