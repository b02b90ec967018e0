package scanner

import (
	"context"
	"slices"

	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// Maintenance is what a scanner asks of the maintenance windows when a
// deadline passes (package maintenance's Room): never per heartbeat.
type Maintenance interface {
	// Holding returns the open window that holds device id (of class, ""
	// for none) whose deadline deadlineMs passed, at nowMs, and when that
	// window ends: the matching one ending last.
	Holding(id, class string, deadlineMs, nowMs int64) (window string, endMs int64, ok bool)
	// MayHold reports whether a member at deadlineMs with timeoutMs may be
	// one a window moved: only those are looked up in Redis.
	MayHold(deadlineMs, timeoutMs int64) bool
	// Active reports whether any window is kept, open or ended: without
	// one, nothing is held and the step costs nothing.
	Active() bool
}

// maintain keeps planned silence from firing (package maintenance). A due
// member that an open window matches is parked at the window's end
// instead; one parked there whose window has ended is released: given its
// own timeout from the end (re-entry as in reenter.go); one released that
// is due again stayed silent, and fires with its window's id (windows). A
// heartbeat since any of these moved the device on (ZADD GT), so every
// move is conditional on an unchanged score, and a record whose score is
// not the member's is stale.
//
// It returns the members of batch that fire now.
func (sc *shardScanner) maintain(ctx context.Context, batch []shard.Member, overrides map[string]int64) (fire []shard.Member, windows map[string]string, err error) {
	s := sc.s
	m := s.opts.Maintenance
	if m == nil || s.opts.Timing == nil || len(batch) == 0 || !m.Active() {
		return batch, nil, nil
	}
	nowMs := s.opts.Now().UnixMilli()
	var moves []shard.HeldMove
	var maybe []dueMember
	held := make(map[string]bool)
	for _, mem := range batch {
		deadline, timeout := s.opts.Timing(mem.ID, mem.Score, overrides)
		class := ""
		if s.opts.ClassOf != nil {
			class = s.opts.ClassOf(mem.Score)
		}
		if wid, end, ok := m.Holding(mem.ID, class, deadline, nowMs); ok {
			moves = append(moves, heldMove(mem, shard.HeldParked, deadline, end, timeout, wid))
			held[mem.ID] = true
		} else if m.MayHold(deadline, timeout) {
			maybe = append(maybe, dueMember{mem, deadline, timeout})
		}
	}
	if len(maybe) > 0 {
		if moves, windows, err = sc.released(ctx, maybe, moves, held); err != nil {
			return nil, nil, err
		}
	}
	if len(moves) == 0 {
		return batch, windows, nil
	}
	if _, err := s.opts.Store.MoveHeld(ctx, sc.id, moves); err != nil {
		return nil, nil, err
	}
	fire = make([]shard.Member, 0, len(batch)-len(moves))
	for _, mem := range batch {
		if !held[mem.ID] {
			fire = append(fire, mem)
		}
	}
	return fire, windows, nil
}

// dueMember is a due member with its deadline and timeout (Options.Timing).
type dueMember struct {
	shard.Member
	deadlineMs, timeoutMs int64
}

// released looks up the records of the members that may be held: a parked
// one whose window ended is released (a move added to moves, its id to
// held), a released one fires with its window's id (windows).
func (sc *shardScanner) released(ctx context.Context, maybe []dueMember, moves []shard.HeldMove, held map[string]bool) ([]shard.HeldMove, map[string]string, error) {
	ids := make([]string, len(maybe))
	for k, mem := range maybe {
		ids[k] = mem.ID
	}
	recs, oks, err := sc.s.opts.Store.HeldRecords(ctx, sc.id, ids)
	if err != nil {
		return nil, nil, err
	}
	if err := sc.recordsElsewhere(ctx, maybe, recs, oks); err != nil {
		return nil, nil, err
	}
	var windows map[string]string
	for k, mem := range maybe {
		if !oks[k] || recs[k].Score != mem.Score {
			continue // no record, or a stale one: the device beat since
		}
		switch recs[k].Stage {
		case shard.HeldParked:
			// Parked at the window's end: its deadline is that end.
			end := mem.deadlineMs
			moves = append(moves, heldMove(mem.Member, shard.HeldReleased, end, end+mem.timeoutMs, mem.timeoutMs, recs[k].Window))
			held[mem.ID] = true
		case shard.HeldReleased:
			if windows == nil {
				windows = make(map[string]string)
			}
			windows[mem.ID] = recs[k].Window
		}
	}
	return moves, windows, nil
}

// recordsElsewhere looks for the records maybe lacks (oks false, or not
// standing) in the shards a device may have come from: a doubling or a
// halving moves a held device to its new shard (the sweep, or a heartbeat
// there) and leaves its record behind. The record stands if it names the
// member's score, which the move kept. Found records are filled in.
func (sc *shardScanner) recordsElsewhere(ctx context.Context, maybe []dueMember, recs []shard.HeldRecord, oks []bool) error {
	if sc.s.opts.Layout == nil {
		return nil
	}
	l := sc.s.opts.Layout.Current()
	byShard := make(map[int][]int)
	for k, mem := range maybe {
		if oks[k] && recs[k].Score == mem.Score {
			continue
		}
		h := shard.Hash(mem.ID)
		for _, n := range []int{l.Previous, l.Count / 2, l.Count * 2} {
			if n >= 1 && n <= shard.MaxShards && shard.Of(h, n) != sc.id && !slices.Contains(byShard[shard.Of(h, n)], k) {
				byShard[shard.Of(h, n)] = append(byShard[shard.Of(h, n)], k)
			}
		}
	}
	for i, ks := range byShard {
		ids := make([]string, len(ks))
		for j, k := range ks {
			ids[j] = maybe[k].ID
		}
		found, ok, err := sc.s.opts.Store.HeldRecords(ctx, i, ids)
		if err != nil {
			return err
		}
		for j, k := range ks {
			if ok[j] && found[j].Score == maybe[k].Score {
				recs[k], oks[k] = found[j], true
			}
		}
	}
	return nil
}

// heldMove moves mem's deadline from fromMs to toMs (its meta and any
// coalescing pad kept), recorded at stage for window wid.
func heldMove(mem shard.Member, stage byte, fromMs, toMs, timeoutMs int64, wid string) shard.HeldMove {
	raw, meta := shard.DecodeScore(mem.Score)
	to := shard.Score(raw+(toMs-fromMs), meta)
	return shard.HeldMove{ID: mem.ID, From: mem.Score, Record: shard.HeldRecord{Stage: stage, Score: to, TimeoutMs: timeoutMs, Window: wid}}
}

// withWindows adds to notes the maintenance window of each member a window
// released (windows: member -> window id).
func withWindows(notes map[string]timeouts.Note, windows map[string]string) map[string]timeouts.Note {
	if len(windows) == 0 {
		return notes
	}
	if notes == nil {
		notes = make(map[string]timeouts.Note, len(windows))
	}
	for id, w := range windows {
		n := notes[id]
		n.MaintenanceID = w
		notes[id] = n
	}
	return notes
}
