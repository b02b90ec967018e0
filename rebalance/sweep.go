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

// pass walks every shard once, moving misplaced members (members) and down
// entries (moveDowns), and finalizes the layout when it found none
// (finalize).
func (s *Sweeper) pass(ctx context.Context, l shard.Layout) error {
	prog, err := s.progress(ctx, l)
	if err != nil {
		return err
	}
	// A pass may finalize only if every live instance routed by l before it
	// started: then no write to a previous shard can land behind it.
	acked := s.allRouteBy(ctx, l)
	sw := &sweep{layout: l, prog: prog}
	if done, err := s.members(ctx, sw); !done || err != nil {
		return err
	}
	if s.metrics != nil {
		s.metrics.Moved.Add(float64(sw.moved))
	}
	_ = s.store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: sw.found - sw.moved, Moved: prog.Moved + sw.moved, Total: sw.total, UpdatedMs: s.now().UnixMilli()})
	downs, err := s.moveDowns(ctx, l)
	if err != nil {
		return err
	}
	if sw.found > 0 || downs > 0 {
		s.log.Info("migration sweep", "moved", sw.moved, "misplaced_found", sw.found, "down_entries_moved", downs, "count", l.Count, "previous", l.Previous)
		return nil // the next pass confirms none are left
	}
	if !acked {
		return nil
	}
	return s.finalize(ctx, l)
}

// sweep is one pass's walk over the members of migration layout.
type sweep struct {
	layout shard.Layout
	// prog is the progress as the pass found it: the last pass's, or the
	// first estimate.
	prog                shard.Progress
	found, moved, total int64
	reported            time.Time
}

// progress returns the stored progress of migration l, estimating it
// when l just started.
func (s *Sweeper) progress(ctx context.Context, l shard.Layout) (shard.Progress, error) {
	prog, _, err := s.store.GetProgress(ctx)
	if err != nil || prog.Epoch == l.Epoch {
		return prog, err
	}
	est, err := s.estimate(ctx, l)
	if err != nil {
		return shard.Progress{}, err
	}
	_ = s.store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: est, UpdatedMs: s.now().UnixMilli()})
	return shard.Progress{Epoch: l.Epoch, Misplaced: est}, nil
}

// members walks the swept shards a ZSCAN step at a time, moving what is
// misplaced (move). done is false when the pass stopped early: the layout
// moved on (finalized elsewhere), or ctx was cancelled.
func (s *Sweeper) members(ctx context.Context, sw *sweep) (done bool, err error) {
	return s.walk(ctx, sw.layout, s.store.ScanShard, s.pause, func(i int, ms []shard.Member) error {
		if err := s.move(ctx, sw, i, ms); err != nil {
			return err
		}
		s.report(ctx, sw)
		return nil
	})
}

// walk reads the swept shards of migration l with scan (a ZSCAN step of
// s.batch members at a time) and hands each step's members to step,
// resting pause between steps. done is false when it stopped early: the
// layout moved on, ctx was cancelled, or step or scan failed (err).
func (s *Sweeper) walk(ctx context.Context, l shard.Layout,
	scan func(ctx context.Context, i int, cursor uint64, count int64) ([]shard.Member, uint64, error),
	pause time.Duration, step func(i int, ms []shard.Member) error,
) (done bool, err error) {
	from, to := sweptShards(l)
	for i := from; i < to; i++ {
		var cursor uint64
		for {
			if s.watcher.Current().Epoch != l.Epoch {
				return false, nil
			}
			ms, next, err := scan(ctx, i, cursor, s.batch)
			if err != nil {
				return false, err
			}
			if err := step(i, ms); err != nil {
				return false, err
			}
			if next == 0 {
				break
			}
			cursor = next
			if pause > 0 && !retry.Sleep(ctx, pause) {
				return false, nil
			}
		}
	}
	return true, nil
}

// move moves the members ms of shard i that belong elsewhere to their new
// shard, except those due within the margin (the scanners' two-shard rule
// handles them).
func (s *Sweeper) move(ctx context.Context, sw *sweep, i int, ms []shard.Member) error {
	sw.total += int64(len(ms))
	byHome := make(map[int][]shard.Member)
	soon := s.now().Add(s.margin).UnixMilli()
	for _, m := range ms {
		if home := sw.layout.ShardOf(shard.Hash(m.ID)); home != i {
			sw.found++
			if d, _ := shard.DecodeScore(m.Score); d > soon {
				byHome[home] = append(byHome[home], m)
			}
		}
	}
	for home, batch := range byHome {
		n, err := s.moveBatch(ctx, i, home, batch)
		if err != nil {
			return err
		}
		sw.moved += int64(n)
	}
	return nil
}

// report writes the progress of a pass under way: what the last pass (or
// the first estimate) found, less what this pass moved; a few times a
// second, not once a shard (4,096 of them).
func (s *Sweeper) report(ctx context.Context, sw *sweep) {
	now := s.now()
	if now.Sub(sw.reported) < progressEvery {
		return
	}
	sw.reported = now
	left := max(sw.prog.Misplaced-sw.moved, sw.found-sw.moved, 0)
	_ = s.store.SetProgress(ctx, shard.Progress{Epoch: sw.layout.Epoch, Misplaced: left, Moved: sw.prog.Moved + sw.moved, Total: sw.total, UpdatedMs: now.UnixMilli()})
	if s.metrics != nil {
		s.metrics.Misplaced.Set(float64(left))
	}
}

// finalize ends migration l: the layout becomes {count, previous: 0}.
func (s *Sweeper) finalize(ctx context.Context, l shard.Layout) error {
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
	_, err := s.walk(ctx, l, s.store.ScanDown, 0, func(i int, ms []shard.Member) error {
		byHome := make(map[int][]shard.Member)
		for _, m := range ms {
			if home := l.ShardOf(shard.Hash(m.ID)); home != i {
				byHome[home] = append(byHome[home], m)
				found++
			}
		}
		for home, batch := range byHome {
			if _, err := s.store.MoveDown(ctx, i, home, batch); err != nil {
				return err
			}
			if err := s.store.MoveKin(ctx, i, home, ids(batch)); err != nil {
				return err
			}
		}
		return nil
	})
	return found, err
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

// moveBatch copies members from shard from into shard to (ZADD GT) and
// then removes them from `from` if unchanged; a member reset meanwhile in
// `from` stays for the next pass.
func (s *Sweeper) moveBatch(ctx context.Context, from, to int, ms []shard.Member) (int, error) {
	overrides, err := s.store.OverridesOf(ctx, from, ms)
	if err != nil {
		return 0, err
	}
	if err := s.store.MoveIn(ctx, to, ms, overrides); err != nil {
		return 0, err
	}
	// A device's parent, gateway mark and hold move with it, before it
	// leaves: meanwhile the scanner looks for them in both shards.
	if err := s.store.MoveKin(ctx, from, to, ids(ms)); err != nil {
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

// ids are the ids of ms.
func ids(ms []shard.Member) []string {
	out := make([]string, len(ms))
	for k, m := range ms {
		out[k] = m.ID
	}
	return out
}
