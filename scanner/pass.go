package scanner

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// shardScanner scans one shard. Only its gocron job runs pass (singleton),
// dispatch goroutines only touch the in-flight set under mu.
type shardScanner struct {
	s  *Scanner
	id int
	// passing makes passes of this scanner one at a time: gocron's
	// singleton mode covers one job, and a scanner regained before its
	// batches left gets a new job while the old job's last pass may still
	// run.
	passing sync.Mutex

	out     sync.WaitGroup // batches handed to dispatch and not yet done
	order   sync.RWMutex   // reads of the shard vs. removal + release of a group
	pending atomic.Bool    // a wake-up is queued
	starved atomic.Bool    // the last pass stopped at max_inflight
	// After a failed scan the shard waits backoff (from scanner.interval,
	// doubling up to maxScanBackoff) before it scans again; only its own
	// pass goroutine touches these.
	backoff   retry.Backoff
	failUntil time.Time
	held      atomic.Int64 // deadline (ms) of the next member due by time but held by the watermark; 0 none
	oneScore  bool         // the last read held one score (pass's own, like backoff)
	stopped   atomic.Bool

	mu  sync.Mutex
	job gocron.Job // the current job (under mu: replaced when the shard is regained)
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
	timer    *time.Timer
	timerAt  int64
}

func (sc *shardScanner) wake() {
	if sc.stopped.Load() || !sc.pending.CompareAndSwap(false, true) {
		return
	}
	sc.mu.Lock()
	job := sc.job
	sc.mu.Unlock()
	if err := job.RunNow(); err != nil {
		sc.pending.Store(false)
	}
}

func (sc *shardScanner) stop() {
	sc.stopped.Store(true)
	sc.mu.Lock()
	if sc.timer != nil {
		sc.timer.Stop()
	}
	sc.mu.Unlock()
}

// pass drains the shard's due members into dispatch and arms the wake-up
// for its next deadline.
func (sc *shardScanner) pass() {
	sc.passing.Lock()
	defer sc.passing.Unlock()
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
				s.scanFailed(sc.id, err)
				sc.failUntil = s.opts.Now().Add(sc.backoff.Next())
			}
			return // a tick after the backoff retries
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
					s.scanFailed(sc.id, err)
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

// maxScanBackoff is the longest a shard whose reads fail waits before it
// reads again.
const maxScanBackoff = 2 * time.Second

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
	due := make([]shard.Member, 0, min(len(ms), batch))
	var next *shard.Member
	for k := range ms {
		if ms[k].Score <= limit && len(due) < batch {
			due = append(due, ms[k])
		} else if ms[k].Score > limit {
			next = &ms[k]
			break
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
		sc.held.Store(0)
		return
	}
	s := sc.s
	deadline, _ := shard.DecodeScore(next.Score)
	fireAt := deadline + s.cfg.Grace.Milliseconds()
	now := s.opts.Now().UnixMilli()
	if fireAt <= now {
		// Due by the clock but not yet by the watermark: the gate wakes us.
		sc.held.Store(deadline)
		return
	}
	sc.held.Store(0)
	if fireAt-now > s.cfg.Interval.Milliseconds() {
		return // the regular tick comes first and re-arms
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.timer != nil && sc.timerAt == fireAt {
		return
	}
	if sc.timer != nil {
		sc.timer.Stop()
	}
	sc.timerAt = fireAt
	d := time.Duration(fireAt-now) * time.Millisecond
	sc.timer = time.AfterFunc(d, func() {
		// A deadline that is due by the clock waits for the watermark:
		// mark it held so the gate's next advance wakes this shard.
		sc.held.Store(deadline)
		sc.wake()
	})
}
