package scanner

import (
	"context"
	"slices"
	"time"

	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// family is one group's gateway step under way (see gateways).
type family struct {
	sc        *shardScanner
	batch     []shard.Member
	kin       []shard.Kin
	overrides map[string]int64
	// now is the clock; upTo how far firing may go (Gate.upTo); maxHold
	// gateways.max_hold; all in ms.
	now, upTo, maxHold int64
	parents            map[string]parentSeen
	acts               []act
	// orphans are the children to remember as waiting for their parent
	// (parent → child, timeout pairs), unwaited those no longer waiting.
	orphans  map[string][]any
	unwaited map[string][]string
	// awaited are the parents some child began to wait for, l the layout
	// their shards are under.
	awaited []string
	l       shard.Layout
	// stale are the members whose hold a heartbeat ended.
	stale []string
}

// parentSeen is what a child's deadline needs of its parent.
type parentSeen struct {
	tracked, down bool
	// lastMs is when it was last heard, deadlineMs its score's deadline.
	lastMs, deadlineMs int64
}

// act is what becomes of a member: it fires at score to, or is rescored
// to it (and waits with wait, or its hold ends when wait is nil), or both.
type act struct {
	fire, rescore bool
	to            float64
	wait          *shard.Wait
	note          timeouts.Note
}

// readParents reads the parents of the group's children, once each:
// those of guess from guessed (read beside the kin), the others now. The
// group's parents are the next group's guess.
func (f *family) readParents(ctx context.Context, l shard.Layout, guess []string, guessed []shard.ParentState) error {
	f.parents = make(map[string]parentSeen)
	var ids, named []string
	for _, kn := range f.kin {
		if kn.Parent == "" {
			continue
		}
		if _, ok := f.parents[kn.Parent]; ok {
			continue
		}
		f.parents[kn.Parent] = parentSeen{}
		named = append(named, kn.Parent)
		if k := slices.Index(guess, kn.Parent); k >= 0 && k < len(guessed) {
			f.seeParent(kn.Parent, guessed[k])
			continue
		}
		ids = append(ids, kn.Parent)
	}
	switch {
	case len(named) > maxGuess:
		f.sc.parents.Store(nil) // children of many gateways: no guess
	case !slices.Equal(named, guess):
		f.sc.parents.Store(&named)
	}
	if len(ids) == 0 {
		return nil
	}
	r := parentReads(l, ids)
	states, err := f.sc.s.opts.Store.ParentStates(ctx, r.IDs, r.Shards)
	if err != nil {
		return err
	}
	for k, id := range ids {
		f.seeParent(id, states[k])
	}
	return nil
}

// maxGuess is the most parents a group's kin read guesses (four reads a
// parent): a group whose children name more is not taken for the next
// one's.
const maxGuess = 4

// seeParent takes what the shards hold of parent id.
func (f *family) seeParent(id string, st shard.ParentState) {
	p := parentSeen{tracked: st.HasLive || st.HasDown}
	switch {
	case st.HasDown && (!st.HasLive || st.Down >= st.Live):
		p.down = true
	case st.HasLive:
		var ov map[string]int64
		if st.Override > 0 {
			ov = map[string]int64{id: st.Override}
		}
		// A parent held for its own parent was last heard as its
		// original deadline says; it is looked at again at its hold's.
		heard := st.Live
		if st.Waited {
			heard = st.Wait.Orig
		}
		deadline, timeout := f.sc.s.opts.Timing(id, heard, ov)
		p.lastMs = deadline - timeout
		p.deadlineMs, _ = shard.DecodeScore(st.Live)
		p.down = !st.Waited && f.silentPast(id, st.Live, p.deadlineMs)
	}
	f.parents[id] = p
}

// silentPast reports whether a parent at score, whose deadline deadlineMs
// the firing gate has passed, is silent past its timeout: every heartbeat
// it sent before that is in Redis, so its timeout is on its way (its
// shard's scanner fires it), unless a maintenance window holds it. Its
// children are unreachable at once then, without a hold and a second look:
// a gateway and its children due together drain in one pass.
func (f *family) silentPast(id string, score float64, deadlineMs int64) bool {
	if deadlineMs > f.upTo {
		return false
	}
	opts := f.sc.s.opts
	if opts.Maintenance == nil || !opts.Maintenance.Active() {
		return true
	}
	class := ""
	if opts.ClassOf != nil {
		class = opts.ClassOf(score)
	}
	_, _, held := opts.Maintenance.Holding(id, class, deadlineMs, f.now)
	return !held
}

// decide chooses what becomes of member k (see gateways).
func (f *family) decide(k int) {
	m, kn := f.batch[k], f.kin[k]
	a := &f.acts[k]
	waiting := kn.Held && kn.Wait.At == m.Score
	if kn.Held && !waiting {
		f.stale = append(f.stale, m.ID)
	}
	a.note.Gateway = kn.Named
	a.fire, a.to = true, m.Score
	if kn.Parent == "" {
		return
	}
	a.note.Parent = kn.Parent
	orig := m.Score
	if waiting {
		orig = kn.Wait.Orig
	}
	deadline, timeout := f.sc.s.opts.Timing(m.ID, orig, f.overrides)
	_, meta := shard.DecodeScore(orig)
	meta &^= shard.FlagPadded // a score set here is its deadline exactly
	p := f.parents[kn.Parent]
	switch {
	case !p.tracked:
		// No parent to wait for (never seen, or deregistered).
		f.fireAt(a, orig, waiting, kn.Parent, m.ID)
	case p.down:
		a.note.Unreachable = true
		f.fireAt(a, orig, waiting, "", "")
		f.orphan(kn.Parent, m.ID, timeout)
	case p.lastMs >= deadline-timeout/2 && !waiting:
		// Its parent is alive: it died alone.
	case p.lastMs >= deadline-timeout/2:
		// The parent beat again since it was held: the child gets its own
		// timeout from the parent's heartbeat. Not before its own padded
		// deadline (ingest.coalesce_window): heartbeats within the window
		// of its last write were skipped, covered by it.
		again := p.lastMs + timeout
		if raw, m := shard.DecodeScore(orig); m.Has(shard.FlagPadded) {
			again = max(again, raw)
		}
		a.rescore, a.to, a.wait = true, shard.Score(again, meta), nil
		a.fire = again <= f.upTo
		f.unwait(kn.Parent, m.ID)
	case f.maxHold == 0 || f.now >= deadline+f.maxHold:
		f.fireAt(a, orig, waiting, kn.Parent, m.ID)
	default:
		at := min(f.recheck(p), deadline+f.maxHold)
		to := shard.Score(at, meta)
		a.fire, a.rescore, a.to, a.wait = false, true, to, &shard.Wait{Orig: orig, At: to}
		if !waiting {
			f.orphan(kn.Parent, m.ID, timeout)
			if !slices.Contains(f.awaited, kn.Parent) {
				f.awaited = append(f.awaited, kn.Parent)
			}
		}
	}
}

// recheck is when a child held for parent p looks again: at the parent's
// deadline + recheckSlack; a parent late already, after half its lateness
// (at least recheckSlack, at most recheckMax).
func (f *family) recheck(p parentSeen) int64 {
	if late := f.now - p.deadlineMs; late > 0 {
		return f.now + min(max(late/2, recheckSlack.Milliseconds()), recheckMax.Milliseconds())
	}
	return p.deadlineMs + recheckSlack.Milliseconds()
}

// fireAt makes a fire at its own deadline's score orig: a held member is
// put back there first, its hold ended (and, unless parent is "", no
// longer waiting for parent).
func (f *family) fireAt(a *act, orig float64, waiting bool, parent, id string) {
	a.fire, a.to = true, orig
	a.note.Held = waiting
	if waiting {
		a.rescore, a.wait = true, nil
		if parent != "" {
			f.unwait(parent, id)
		}
	}
}

func (f *family) orphan(parent, id string, timeoutMs int64) {
	if f.orphans == nil {
		f.orphans = make(map[string][]any)
	}
	f.orphans[parent] = append(f.orphans[parent], id, timeoutMs)
}

func (f *family) unwait(parent, id string) {
	if f.unwaited == nil {
		f.unwaited = make(map[string][]string)
	}
	f.unwaited[parent] = append(f.unwaited[parent], id)
}

// apply carries the decisions out, in steps: remember the children now
// waiting for their parent, and mark the parent awaited, so that ingest
// gives them their own timeout from its next heartbeat (first: a child
// remembered in vain, one that beat meanwhile, is one that is not found
// waiting when its parent returns, harmless), rescore, forget the children no longer waiting and the
// holds heartbeats ended, count the gateways' held children. It returns
// the members that fire, at the score they fire at, and their notes.
func (f *family) apply(ctx context.Context) ([]shard.Member, map[string]timeouts.Note, error) {
	st := f.sc.s.opts.Store
	ttl := f.sc.s.downMemory() + time.Duration(f.maxHold)*time.Millisecond
	if err := st.AddOrphans(ctx, f.orphans, ttl); err != nil {
		return nil, nil, err
	}
	if err := st.Await(ctx, f.l, f.awaited, f.now, ttl); err != nil {
		return nil, nil, err
	}
	var ms []shard.Member
	var to []float64
	var waits []*shard.Wait
	var idx []int
	holding := false
	for k := range f.acts {
		if a := &f.acts[k]; a.rescore {
			ms, to, waits, idx = append(ms, f.batch[k]), append(to, a.to), append(waits, a.wait), append(idx, k)
			holding = holding || a.wait != nil
		}
	}
	if holding {
		defer f.sc.kin.writingHolds()()
	}
	if len(ms) > 0 {
		done, err := st.Rescore(ctx, f.sc.id, ms, to, waits)
		if err != nil {
			return nil, nil, err
		}
		for j, k := range idx {
			if !done[j] {
				f.acts[k].fire = false // it beat meanwhile: it goes on
			}
		}
	}
	if err := st.DropOrphans(ctx, f.unwaited); err != nil {
		return nil, nil, err
	}
	if err := st.EndWaits(ctx, f.sc.id, f.stale); err != nil {
		return nil, nil, err
	}
	return f.firing(ctx)
}

// firing returns the members that fire and their notes, with the held
// children of the gateways among them.
func (f *family) firing(ctx context.Context) ([]shard.Member, map[string]timeouts.Note, error) {
	fire := make([]shard.Member, 0, len(f.batch))
	notes := make(map[string]timeouts.Note, len(f.batch))
	var gateways []string
	for k := range f.acts {
		a := &f.acts[k]
		if !a.fire {
			continue
		}
		id := f.batch[k].ID
		fire = append(fire, shard.Member{ID: id, Score: a.to})
		if a.note != (timeouts.Note{}) {
			notes[id] = a.note
		}
		if a.note.Gateway {
			gateways = append(gateways, id)
		}
	}
	if len(gateways) > 0 {
		held, err := f.sc.s.opts.Store.ChildrenHeld(ctx, gateways)
		if err != nil {
			return nil, nil, err
		}
		for k, id := range gateways {
			n := notes[id]
			n.ChildrenHeld = held[k]
			notes[id] = n
		}
	}
	return fire, notes, nil
}
