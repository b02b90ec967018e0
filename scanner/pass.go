package scanner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// shardScanner scans one shard. Only run calls pass, on a pass runner (run
// keeps the passes one at a time), dispatch goroutines only touch the
// in-flight set under mu.
type shardScanner struct {
	s  *Scanner
	id int
	// passing is held by the run that passes; again asks it for one more
	// pass. A run that finds another passing leaves it the pass, so
	// passes are one at a time and no run waits: not when a wake-up comes
	// during a pass, nor when a scanner regained before its batches left
	// gets a new job while its old job's last run still passes.
	passing sync.Mutex
	again   atomic.Bool

	out     sync.WaitGroup // batches handed to dispatch and not yet done
	order   sync.RWMutex   // reads of the shard vs. removal + release of a group
	pending atomic.Bool    // a wake-up is queued
	starved atomic.Bool    // the last pass stopped at max_inflight
	// After a failed scan the shard waits backoff (from scanner.interval,
	// doubling up to maxScanBackoff) before it scans again; only its own
	// pass goroutine touches these.
	backoff   retry.Backoff
	failUntil time.Time
	held      atomic.Int64 // deadline (ms) of the next member due by time but held by the watermark; 0 none (set by setHeld)
	oneScore  bool         // the last read held one score (pass's own, like backoff)
	stopped   atomic.Bool
	// kin remembers the shard's family keys found absent (see gateways).
	kin absentKin
	// parents are the parents the last group's children named, read
	// beside the next group's kin (see gateways).
	parents atomic.Pointer[[]string]

	mu sync.Mutex
	// inflight holds the members handed to dispatch, from claim until
	// the pass's next read after their batch completed (forgetDone): a
	// read that began before a batch's removal may still return its
	// members. A member is claimed only while it is not in the set, so
	// each one in done is there once, and still in the set.
	inflight map[string]struct{}
	done     []string // members whose batch completed since the last pass began
	deleted  int      // deletions since the map was last rebuilt
	active   int      // members in the set whose batch is still out
	batches  int      // groups out, in units (see units) against max_inflight
	// The wake-up for the next deadline: one timer per shard, reset for
	// each deadline. timerAt (Unix ms) is when it goes off, 0 when it is
	// not set; timerDeadline the deadline it is for.
	timer         *time.Timer
	timerAt       int64
	timerDeadline int64
}

// wake asks for a pass now, unless one is asked for already; it never
// blocks. It reports whether the scanner still runs.
func (sc *shardScanner) wake() bool {
	if sc.stopped.Load() {
		return false
	}
	if sc.pending.CompareAndSwap(false, true) {
		sc.s.woke(sc)
	}
	return true
}

func (sc *shardScanner) stop() {
	sc.stopped.Store(true)
	sc.mu.Lock()
	if sc.timer != nil {
		sc.timer.Stop()
		sc.timerAt = 0
	}
	sc.mu.Unlock()
	sc.setHeld(0)
}

// run is the shard's pass runner's work: it passes until no wake-up asks
// for another, unless another run is passing, which then passes for it.
func (sc *shardScanner) run() {
	sc.again.Store(true)
	for sc.again.Load() && sc.passing.TryLock() {
		for sc.again.Swap(false) {
			sc.pass()
		}
		sc.passing.Unlock()
	}
}

// pass drains the shard's due members into dispatch and arms the wake-up
// for its next deadline. Only run calls it, holding passing.
func (sc *shardScanner) pass() {
	sc.pending.Store(false)
	s := sc.s
	if sc.stopped.Load() || s.opts.Now().Before(sc.failUntil) {
		return
	}
	ctx := s.dispatchCtx
	batch := s.cfg.BatchSize
	// Pops are gathered into groups (see groupCap): one produce request and
	// one conditional removal per group, while each pop still takes at most
	// batch_size members.
	var st passState
	defer st.flush(sc)
	// Members in flight are still in the shard, at its front: the read skips
	// as many. order keeps that count in step with the shard (a group's
	// removal and its release from the in-flight set happen together, never
	// between the count and the read). Should the front still hold something
	// else (a write of an already-past deadline), members the read returns
	// that are in flight push the next read further, so a pass always makes
	// progress; what it stepped over is read by the next pass.
	windows := 1 // pops read per round trip: more while pops come back full
	// The watermarks and holds this pass fires by are no older than a
	// busy gate's, however long the gate has idled.
	s.opts.Gate.fresh(ctx)
	for !sc.stopped.Load() {
		sc.forgetDone()
		upTo := s.opts.Gate.upTo(s.opts.Now())
		limit := shard.MaxScore(upTo)
		sc.order.RLock()
		sc.mu.Lock()
		offset, busy := sc.active+st.extra, sc.batches >= s.cfg.MaxInflight
		sc.mu.Unlock()
		if busy {
			sc.order.RUnlock()
			sc.starved.Store(true)
			return // a completing group wakes the shard again
		}
		// Each window is one pop and, past it, the next member: the next
		// deadline when the pop is not full.
		// A read of several pops first tries the range as one deadline
		// when the last read was one (see shard.Store.DueWindows).
		reads, one, err := s.opts.Store.DueWindows(ctx, sc.id, offset, batch, batch+1, windows, windows > 1 && sc.oneScore)
		sc.oneScore = one
		sc.order.RUnlock()
		if err != nil {
			if ctx.Err() == nil {
				sc.failed(err)
			}
			return // the timer retries after the backoff
		}
		sc.backoff.Reset()
		s.scans.Succeeded()
		// Room for what this round trip can add to the group at once,
		// not a doubling per pop while a shard drains.
		hint := min(groupCap(batch, windows), len(reads)*batch)
		for _, ms := range reads {
			full, next, err := sc.pop(ctx, &st, ms, limit, hint)
			if err != nil {
				if ctx.Err() == nil {
					sc.failed(err)
				}
				return
			}
			if len(st.group) >= groupCap(batch, windows) {
				st.flush(sc)
			}
			if !full {
				sc.arm(next, upTo)
				return
			}
		}
		// Full pops: the shard is behind. Read further ahead each round
		// trip, so that a mass expiry costs few round trips and commands
		// per member, while a shard that is not behind reads one pop.
		windows = min(windows*rampFactor, maxWindows)
	}
}

// failed counts a failed read and sets the timer to pass again once the
// backoff has passed.
func (sc *shardScanner) failed(err error) {
	s := sc.s
	s.scanFailed(sc.id, err)
	now := s.opts.Now()
	sc.failUntil = now.Add(sc.backoff.Next())
	sc.setTimer(sc.failUntil.UnixMilli()+1, 0, now.UnixMilli(), true) // not before failUntil, in whole ms
}

// A draining pass reads rampFactor times more pops per round trip each
// time they all come back full, up to maxWindows pops.
const (
	rampFactor = 4
	maxWindows = 64
)

// groupCap is how many members a pass gathers before it hands them to
// dispatch: groupPops pops, or, once the pass reads further ahead, what
// one read returns, up to maxGroup.
func groupCap(batch, windows int) int {
	return max(groupPops*batch, min(windows*batch, maxGroup))
}

// maxGroup bounds the groups a draining pass gathers from many small pops.
const maxGroup = 2000

// A shard whose reads fail waits from minScanBackoff (or scanner.interval,
// if shorter), doubling up to maxScanBackoff, before it reads again.
const (
	minScanBackoff = 100 * time.Millisecond
	maxScanBackoff = 2 * time.Second
)

// passState is what one pass carries from pop to pop: the group being
// gathered for dispatch and how many in-flight members its reads met.
type passState struct {
	group  []shard.Member
	others map[string]copyElsewhere // the group's copies in other shards
	extra  int                      // read members already in flight
}

// flush hands the gathered group to dispatch.
func (st *passState) flush(sc *shardScanner) {
	if len(st.group) > 0 {
		sc.dispatch(st.group, st.others)
		st.group, st.others = nil, nil
	}
}

// pop takes one read's due members (at most batch_size) into the group and
// reports whether the pop was full, else the next member past the due ones.
func (sc *shardScanner) pop(ctx context.Context, st *passState, ms []shard.Member, limit float64, hint int) (bool, *shard.Member, error) {
	batch := sc.s.cfg.BatchSize
	var due []shard.Member // none, mostly: an idle pass allocates nothing here
	var next *shard.Member
	for k := range ms {
		if ms[k].Score > limit {
			next = &ms[k]
			break
		}
		if len(due) < batch {
			if due == nil {
				due = make([]shard.Member, 0, min(len(ms)-k, batch))
			}
			due = append(due, ms[k])
		}
	}
	full := len(due) == batch
	var others map[string]copyElsewhere
	if l := sc.s.opts.Layout.Current(); l.Migrating() && len(due) > 0 {
		var err error
		if due, others, err = sc.resolve(ctx, l, due); err != nil {
			return false, nil, err
		}
	}
	fresh := sc.claim(due)
	st.extra += len(due) - len(fresh)
	if st.group == nil && len(fresh) > 0 {
		st.group = make([]shard.Member, 0, max(hint, len(fresh)))
	}
	st.group = append(st.group, fresh...)
	for id, c := range othersOf(fresh, others) {
		if st.others == nil {
			st.others = make(map[string]copyElsewhere)
		}
		st.others[id] = c
	}
	return full, next, nil
}

// forgetDone drops the members whose group completed before this read from
// the in-flight set. A completed member must stay in the set until every
// read that may have returned it has been claimed: the pass reads and claims
// in turn, so that is until its next read.
func (sc *shardScanner) forgetDone() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, id := range sc.done {
		delete(sc.inflight, id)
	}
	// Deleted slots of a Go map stay as tombstones that lengthen every
	// lookup until the map grows; with members cycling through it at the
	// drain rate, rebuild it once deletions outnumber its live entries.
	sc.deleted += len(sc.done)
	if sc.deleted > 4*len(sc.inflight)+1024 {
		fresh := make(map[string]struct{}, len(sc.inflight))
		for id := range sc.inflight {
			fresh[id] = struct{}{}
		}
		sc.inflight, sc.deleted = fresh, 0
	}
	clear(sc.done)
	sc.done = sc.done[:0]
}

// groupPops is how many pops one dispatch group gathers at most.
const groupPops = 10

// claim marks members in flight and returns those that were not already.
func (sc *shardScanner) claim(due []shard.Member) []shard.Member {
	if len(due) == 0 {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	fresh := due[:0]
	for _, m := range due {
		if _, ok := sc.inflight[m.ID]; ok {
			continue
		}
		sc.inflight[m.ID] = struct{}{}
		sc.active++
		fresh = append(fresh, m)
	}
	return fresh
}

// arm sets the wake-up for the shard's next deadline, or records that it
// waits for the watermark.
func (sc *shardScanner) arm(next *shard.Member, upTo int64) {
	if next == nil {
		sc.setHeld(0)
		return
	}
	s := sc.s
	deadline, _ := shard.DecodeScore(next.Score)
	fireAt := deadline + s.cfg.Grace.Milliseconds()
	now := s.opts.Now().UnixMilli()
	if fireAt <= now {
		// Due by the clock but not yet by the watermark: the gate wakes us.
		sc.setHeld(deadline)
		return
	}
	sc.setHeld(0)
	if time.Duration(fireAt-now)*time.Millisecond > s.cfg.WakeWithin() {
		return // a poll comes first and sets the timer
	}
	// This pass read the shard, so its next deadline may be later than the
	// timer's: the timer moves either way.
	sc.setTimer(fireAt, deadline, now, false)
}

// polled takes the deadline the poll found at the shard's front: due by the
// clock, it wakes the shard (a member in flight, one held by the
// watermark, or one no wake-up reported); due before the next poll, it
// sets the timer, unless the timer goes off sooner.
func (sc *shardScanner) polled(deadline, now int64) {
	s := sc.s
	fireAt := deadline + s.cfg.Grace.Milliseconds()
	switch {
	case fireAt <= now:
		sc.wake()
	case time.Duration(fireAt-now)*time.Millisecond <= s.cfg.WakeWithin():
		// Only ever sooner: a pass may have set it for a deadline
		// written after the poll's read.
		sc.setTimer(fireAt, deadline, now, true)
	}
}

// setTimer makes the timer wake the shard at fireAt (Unix ms) for deadline
// (0: a retry); with sooner, only if it is not set to go off before then.
func (sc *shardScanner) setTimer(fireAt, deadline, now int64, sooner bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.timerAt != 0 && (sc.timerAt == fireAt || sooner && sc.timerAt < fireAt) {
		return
	}
	sc.timerAt, sc.timerDeadline = fireAt, deadline
	d := time.Duration(fireAt-now) * time.Millisecond
	if sc.timer == nil {
		sc.timer = time.AfterFunc(d, sc.timerFired)
		return
	}
	sc.timer.Reset(d)
}

func (sc *shardScanner) timerFired() {
	sc.mu.Lock()
	deadline := sc.timerDeadline
	sc.timerAt = 0
	sc.mu.Unlock()
	if deadline != 0 {
		// A deadline that is due by the clock waits for the watermark:
		// mark it held so the gate's next advance wakes this shard.
		sc.setHeld(deadline)
	}
	sc.wake()
}

// setHeld records the deadline that waits for the watermark (0: none), and
// keeps the Scanner's set of held shards in step.
func (sc *shardScanner) setHeld(deadline int64) {
	if deadline == 0 && sc.held.Load() == 0 {
		return
	}
	s := sc.s
	s.heldMu.Lock()
	sc.held.Store(deadline)
	if deadline != 0 {
		s.held[sc] = struct{}{}
	} else {
		delete(s.held, sc)
	}
	s.opts.Gate.setWaiting(len(s.held) > 0)
	s.heldMu.Unlock()
}
