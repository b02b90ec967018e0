package rebalance

import (
	"context"
	"log/slog"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// Sweeper moves the members a doubling or halving left in their previous
// shard to their new one, in bounded batches, and finalizes the layout to
// {count, previous: 0} once a full pass finds none left and every live
// instance routes by the new layout. Only one instance sweeps at a time: the
// one whose Leader func says so (the owner of shard 0's scanner lease).
type Sweeper struct {
	store   *shard.Store
	watcher *Watcher
	leader  func() bool
	log     *slog.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	// batch is how many members one ZSCAN step reads; pause is the rest
	// between steps, so scanners and ingest keep the Redis they need.
	batch int64
	pause time.Duration
	// stale is how long an instance may go without re-reading the layout
	// before it no longer counts as live for finalization.
	stale time.Duration
	// margin keeps the sweep off members due within it: the scanners' two-
	// shard rule handles those, and a member moved while its timeout is in
	// flight could otherwise fire from both shards.
	margin time.Duration
}

// SweeperOptions wire a Sweeper.
type SweeperOptions struct {
	Store *shard.Store
	// Watcher is this instance's layout, which the sweeper finalizes.
	Watcher *Watcher
	// Leader reports whether this instance sweeps now.
	Leader  func() bool
	Metrics *metrics.Metrics // nil: no misplaced gauge
	Log     *slog.Logger
}

// NewSweeper returns a sweeper; Run sweeps.
func NewSweeper(opts SweeperOptions) *Sweeper {
	return &Sweeper{store: opts.Store, watcher: opts.Watcher, leader: opts.Leader, log: opts.Log, metrics: opts.Metrics, now: time.Now,
		batch: 500, pause: time.Millisecond, stale: 10 * opts.Watcher.interval, margin: 500 * time.Millisecond}
}

// Run sweeps while a migration is under way until ctx is cancelled.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.watcher.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		l := s.watcher.Current()
		if !l.Migrating() {
			if s.metrics != nil {
				s.metrics.Misplaced.Set(0)
			}
			continue
		}
		if !s.leader() {
			continue
		}
		if err := s.pass(ctx, l); err != nil && ctx.Err() == nil {
			s.log.Warn("migration sweep failed, retrying", "err", err)
		}
	}
}

// pass walks every shard once, moving misplaced members, and finalizes when
// it found none.
func (s *Sweeper) pass(ctx context.Context, l shard.Layout) error {
	prog, _, err := s.store.GetProgress(ctx)
	if err != nil {
		return err
	}
	if prog.Epoch != l.Epoch {
		est, err := s.estimate(ctx, l)
		if err != nil {
			return err
		}
		prog = shard.Progress{Epoch: l.Epoch, Misplaced: est}
		_ = s.store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: est, UpdatedMs: s.now().UnixMilli()})
	}
	// A pass may finalize only if every live instance routed by l before it
	// started: then no write to a previous shard can land behind it.
	acked := s.allRouteBy(ctx, l)
	var found, moved, total int64
	var reported time.Time
	from, to := sweptShards(l)
	for i := from; i < to; i++ {
		var cursor uint64
		for {
			if s.watcher.Current().Epoch != l.Epoch {
				return nil // the layout moved on (finalized elsewhere)
			}
			ms, next, err := s.store.ScanShard(ctx, i, cursor, s.batch)
			if err != nil {
				return err
			}
			total += int64(len(ms))
			byHome := make(map[int][]shard.Member)
			soon := s.now().Add(s.margin).UnixMilli()
			for _, m := range ms {
				if home := l.ShardOf(shard.Hash(m.ID)); home != i {
					found++
					if d, _ := shard.DecodeScore(m.Score); d > soon {
						byHome[home] = append(byHome[home], m)
					}
				}
			}
			for home, batch := range byHome {
				n, err := s.move(ctx, i, home, batch)
				if err != nil {
					return err
				}
				moved += int64(n)
			}
			// Until the pass is through, what the last pass (or the first
			// estimate) found, less what this pass moved; written a few
			// times a second, not once a shard (4,096 of them).
			if now := s.now(); now.Sub(reported) >= progressEvery {
				reported = now
				left := max(prog.Misplaced-moved, found-moved, 0)
				_ = s.store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: left, Moved: prog.Moved + moved, Total: total, UpdatedMs: now.UnixMilli()})
				if s.metrics != nil {
					s.metrics.Misplaced.Set(float64(left))
				}
			}
			if next == 0 {
				break
			}
			cursor = next
			if s.pause > 0 && !retry.Sleep(ctx, s.pause) {
				return nil
			}
		}
	}
	if s.metrics != nil {
		s.metrics.Moved.Add(float64(moved))
	}
	_ = s.store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: found - moved, Moved: prog.Moved + moved, Total: total, UpdatedMs: s.now().UnixMilli()})
	downs, err := s.moveDowns(ctx, l)
	if err != nil {
		return err
	}
	if found > 0 || downs > 0 {
		s.log.Info("migration sweep", "moved", moved, "misplaced_found", found, "down_entries_moved", downs, "count", l.Count, "previous", l.Previous)
		return nil // the next pass confirms none are left
	}
	if !acked {
		return nil
	}
	final, err := s.store.SetLayout(ctx, l.Epoch, shard.Layout{Count: l.Count, SinceMs: s.now().UnixMilli()})
	if err != nil {
		return err
	}
	s.log.Info("migration finalized", "count", final.Count, "epoch", final.Epoch)
	_ = s.watcher.refresh(ctx)
	return nil
}

// progressEvery is how often a pass writes its progress.
const progressEvery = 250 * time.Millisecond

// sweptShards are the shards a pass of migration l walks: the only ones a
// misplaced member can be in. A doubling moves a device at most from shard
// i to i+previous, so only the previous shards hold misplaced members; a
// halving empties the shards past the new count. Each member, and each
// down entry, is written to its new shard by every write and every timeout
// from the migration's start, so the other shards only ever hold members
// that are home.
func sweptShards(l shard.Layout) (from, to int) {
	if l.Count > l.Previous {
		return 0, l.Previous
	}
	return l.Count, l.Previous
}

// moveDowns moves the down entries of devices whose shard changed into
// their new shard's down set, so that once the migration is finalized a
// device that timed out in its old shard is still found there: its return
// is a recovery, a replay of it no second timeout. It returns how many
// misplaced entries it found.
func (s *Sweeper) moveDowns(ctx context.Context, l shard.Layout) (int, error) {
	found := 0
	from, to := sweptShards(l)
	for i := from; i < to; i++ {
		var cursor uint64
		for {
			if s.watcher.Current().Epoch != l.Epoch {
				return found, nil
			}
			ms, next, err := s.store.ScanDown(ctx, i, cursor, s.batch)
			if err != nil {
				return found, err
			}
			byHome := make(map[int][]shard.Member)
			for _, m := range ms {
				if home := l.ShardOf(shard.Hash(m.ID)); home != i {
					byHome[home] = append(byHome[home], m)
					found++
				}
			}
			for home, batch := range byHome {
				if _, err := s.store.MoveDown(ctx, i, home, batch); err != nil {
					return found, err
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return found, nil
}

// estimate counts the misplaced members of a migration that just started
// from shard sizes alone: after a doubling about half of each previous
// shard's members move; after a halving every member of the dropped shards.
func (s *Sweeper) estimate(ctx context.Context, l shard.Layout) (int64, error) {
	sizes, err := s.store.Sizes(ctx, l.Shards())
	if err != nil {
		return 0, err
	}
	var n int64
	if l.Count > l.Previous {
		for i := 0; i < l.Previous; i++ {
			n += sizes[i] / 2
		}
	} else {
		for i := l.Count; i < l.Previous; i++ {
			n += sizes[i]
		}
	}
	return n, nil
}

// allRouteBy reports whether every live instance has loaded layout l (or a
// later one), so no instance can still write to a previous shard.
func (s *Sweeper) allRouteBy(ctx context.Context, l shard.Layout) bool {
	seen, err := s.store.LayoutSeen(ctx, s.now().Add(-s.stale).UnixMilli())
	if err != nil {
		return false
	}
	for id, sn := range seen {
		if sn.Epoch < l.Epoch {
			s.log.Debug("migration waits for an instance to load the layout", "instance", id, "epoch", sn.Epoch)
			return false
		}
	}
	return true
}

// move copies members from shard from into shard to (ZADD GT) and then
// removes them from `from` if unchanged; a member reset meanwhile in `from`
// stays for the next pass.
func (s *Sweeper) move(ctx context.Context, from, to int, ms []shard.Member) (int, error) {
	overrides, err := s.store.OverridesOf(ctx, from, ms)
	if err != nil {
		return 0, err
	}
	if err := s.store.MoveIn(ctx, to, ms, overrides); err != nil {
		return 0, err
	}
	removed, err := s.store.RemoveIf(ctx, from, ms)
	if err != nil {
		return 0, err
	}
	if len(removed) < len(ms) {
		// A member that left `from` since the scan read it may have fired
		// there; then the copy just made is a second one of the same
		// silence: take it back (if nothing raised it meanwhile).
		if err := s.undoFired(ctx, from, to, ms, removed); err != nil {
			return 0, err
		}
	}
	return len(removed), nil
}

func (s *Sweeper) undoFired(ctx context.Context, from, to int, ms []shard.Member, removed map[string]int64) error {
	var gone []shard.Member
	for _, m := range ms {
		if _, ok := removed[m.ID]; !ok {
			gone = append(gone, m)
		}
	}
	shards := make([]int, len(gone))
	ids := make([]string, len(gone))
	for k, m := range gone {
		shards[k], ids[k] = from, m.ID
	}
	copies, err := s.store.Copies(ctx, shards, ids)
	if err != nil {
		return err
	}
	var undo []shard.Member
	for k, m := range gone {
		if c := copies[k]; c.HasDown && c.Down >= m.Score {
			undo = append(undo, m)
		}
	}
	if len(undo) > 0 {
		_, err = s.store.RemoveIf(ctx, to, undo)
	}
	return err
}
