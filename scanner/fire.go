package scanner

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// ackedBackoff paces the retries of what follows Kafka's acknowledgement
// of a group (its removal, its raced recoveries, its other copies): they
// must reach Redis, or the group fires again, so they are retried until
// Run's drain ends them.
var ackedBackoff = retry.Backoff{Min: 10 * time.Millisecond, Max: 2 * time.Second}

// dispatch hands a batch to dispatch in its own goroutine (fire), which
// removes the members once Kafka acknowledged them and releases them from
// the in-flight set.
func (sc *shardScanner) dispatch(batch []shard.Member, others map[string]copyElsewhere) {
	s := sc.s
	detectedAt := s.opts.Now()
	sc.mu.Lock()
	sc.batches += sc.units(len(batch))
	sc.mu.Unlock()
	s.inflight.Add(1)
	sc.out.Add(1)
	go func() {
		defer s.inflight.Done()
		defer sc.out.Done()
		sc.fire(batch, others, detectedAt)
	}()
}

// fire publishes one group, in steps: keep the members that may fire
// (firing), publish their timeouts and wait for Kafka's acknowledgement,
// remove them (remove), then publish the recoveries that raced them and
// remove their other copies (afterRemoval). What is not removed is
// released to be read again by a later pass.
func (sc *shardScanner) fire(batch []shard.Member, others map[string]copyElsewhere, detectedAt time.Time) {
	s := sc.s
	ctx := s.dispatchCtx
	released, moved := false, false
	defer func() {
		if !released {
			sc.release(batch) // not removed: read again by a later pass
		}
		if moved {
			// Members given a new deadline left the shard's front while
			// counted in flight: a pass reads the shard again now, and
			// arms its timer for what is next, instead of at the poll.
			sc.wake()
		}
	}()
	fire, overrides, notes, moved, err := sc.firing(ctx, batch)
	if err != nil {
		s.opts.Metrics.ScanErrors.Inc()
		return // stays in the shard; the next pass retries
	}
	if len(fire) == 0 {
		return
	}
	if err := sc.publish(ctx, fire, overrides, notes, detectedAt); err != nil {
		return // shutting down: the members stay for the next owner
	}
	if h := s.opts.Hooks.BeforeRemove; h != nil {
		h(sc.id, fire)
	}
	raced, err := sc.remove(ctx, batch, fire)
	released = true
	if err != nil {
		return
	}
	sc.afterRemoval(ctx, fire, raced, others)
}

// firing returns the members of batch that fire, their override timeouts
// and what their events note of them: not the replays (dropReplays), nor
// those a hold, a maintenance window or a silent parent kept, which are
// given a new deadline instead (reenter, maintain, gateways; moved says
// there were some).
func (sc *shardScanner) firing(ctx context.Context, batch []shard.Member) (fire []shard.Member, overrides map[string]int64, notes map[string]timeouts.Note, moved bool, err error) {
	if fire, err = sc.dropReplays(ctx, batch); err != nil {
		return nil, nil, nil, false, err
	}
	if overrides, err = sc.s.opts.Store.OverridesOf(ctx, sc.id, fire); err != nil {
		return nil, nil, nil, false, err
	}
	n := len(fire)
	if fire, err = sc.reenter(ctx, fire, overrides); err != nil {
		return nil, nil, nil, false, err
	}
	var windows map[string]string
	if fire, windows, err = sc.maintain(ctx, fire, overrides); err != nil {
		return nil, nil, nil, false, err
	}
	if fire, notes, err = sc.gateways(ctx, fire, overrides); err != nil {
		return nil, nil, nil, false, err
	}
	return fire, overrides, withWindows(notes, windows), len(fire) < n, nil
}

// remove takes the acknowledged members fire out of the shard, each only if
// its score is unchanged, remembering them as down; it retries until Run's
// drain ends it, then releases batch from the in-flight set. raced are the
// members reset meanwhile: devices that beat again.
func (sc *shardScanner) remove(ctx context.Context, batch, fire []shard.Member) (raced []shard.Raced, err error) {
	s := sc.s
	minDown := s.opts.MinDownMemory
	if minDown == 0 {
		minDown = defaultMinDownMemory
	}
	remember := max(s.opts.RecoveryWindow, minDown)
	prune := shard.MaxScore(s.opts.Now().Add(-remember).UnixMilli())
	sc.order.Lock()
	defer sc.order.Unlock()
	err = retry.Do(ctx, ackedBackoff, nil, func() (err error) {
		_, raced, err = s.opts.Store.Fired(ctx, sc.id, fire, prune)
		return err
	})
	sc.release(batch)
	return raced, err
}

// afterRemoval publishes the recoveries of the devices that raced their
// timeout and removes the fired members' copies in other shards (a
// migration), retrying each until Run's drain ends it.
func (sc *shardScanner) afterRemoval(ctx context.Context, fire []shard.Member, raced []shard.Raced, others map[string]copyElsewhere) {
	if len(raced) > 0 && sc.s.opts.RecoveryWindow > 0 {
		if err := retry.Do(ctx, ackedBackoff, nil, func() error { return sc.reportRaced(ctx, raced) }); err != nil {
			return
		}
	}
	if len(others) > 0 {
		if err := retry.Do(ctx, ackedBackoff, nil, func() error { return sc.removeOthers(ctx, others) }); err != nil {
			return
		}
	}
	for _, m := range fire {
		sc.s.TestSignals.Fired.Send(m.ID)
	}
}

// reportRaced publishes the recoveries of devices whose reset raced their
// published timeout: they beat again after their deadline, before any down
// entry existed for ingest to find.
func (sc *shardScanner) reportRaced(ctx context.Context, raced []shard.Raced) error {
	ms := make([]shard.Member, len(raced))
	for k, r := range raced {
		ms[k] = shard.Member{ID: r.ID, Score: r.Score}
	}
	overrides, err := sc.s.opts.Store.OverridesOf(ctx, sc.id, ms)
	if err != nil {
		return err
	}
	return sc.s.opts.Dispatcher.Raced(ctx, sc.id, raced, overrides)
}

// dropReplays returns the members of batch that may fire. A member not
// later than a timeout its device already fired in this shard is a replayed
// heartbeat that ingest wrote before it saw the down set (see
// shard.Store.Write): it is removed, if still unchanged, and never fires.
func (sc *shardScanner) dropReplays(ctx context.Context, batch []shard.Member) ([]shard.Member, error) {
	downs, err := sc.s.opts.Store.DownScores(ctx, sc.id, batch)
	if err != nil {
		return nil, err
	}
	var stale []shard.Member
	fire := batch
	for k, m := range batch {
		if downs[k] >= m.Score {
			if stale == nil {
				fire = make([]shard.Member, 0, len(batch))
				fire = append(fire, batch[:k]...)
			}
			stale = append(stale, m)
		} else if stale != nil {
			fire = append(fire, m)
		}
	}
	if len(stale) == 0 {
		return batch, nil
	}
	removed, err := sc.s.opts.Store.RemoveIf(ctx, sc.id, stale)
	if err != nil {
		return nil, err
	}
	if sc.s.opts.Metrics != nil {
		sc.s.opts.Metrics.ReplaysDropped.Add(float64(len(removed)))
	}
	return fire, nil
}

// othersOf keeps the other copies of the members of batch.
func othersOf(batch []shard.Member, others map[string]copyElsewhere) map[string]copyElsewhere {
	if len(others) == 0 {
		return nil
	}
	out := make(map[string]copyElsewhere)
	for _, m := range batch {
		if c, ok := others[m.ID]; ok {
			out[m.ID] = c
		}
	}
	return out
}

// units is what a group of n members counts against scanner.max_inflight:
// one per groupPops pops begun, so that the large groups of a draining pass
// keep as few members in flight as the same members in small groups would.
func (sc *shardScanner) units(n int) int {
	per := groupPops * sc.s.cfg.BatchSize
	return max(1, (n+per-1)/per)
}

// release ends batch's flight: its members stay in the in-flight set until
// the pass's next read (forgetDone), no longer counted as active.
func (sc *shardScanner) release(batch []shard.Member) {
	sc.mu.Lock()
	for _, m := range batch {
		sc.active--
		sc.done = append(sc.done, m.ID)
	}
	sc.batches -= sc.units(len(batch))
	sc.mu.Unlock()
	if sc.starved.Swap(false) {
		sc.wake() // the last pass stopped at max_inflight: go on draining
	}
}
