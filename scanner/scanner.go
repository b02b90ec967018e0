package scanner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
)

// Dispatcher publishes the timeouts of due members and returns once Kafka
// acknowledged all of them (retrying meanwhile), or ctx's error.
type Dispatcher interface {
	Timeouts(ctx context.Context, shardID int, due []shard.Member, overrides map[string]int64, detectedAt time.Time) error
	// Raced publishes the recoveries of devices that beat again while
	// their timeout was being published (see shard.Store.Fired);
	// overrides holds the per-device timeouts of their current scores.
	Raced(ctx context.Context, shardID int, raced []shard.Raced, overrides map[string]int64) error
}

// DefaultMinDownMemory is how long a fired device is remembered as down even
// with recovered events disabled or a short recovery window: long enough
// that a replayed heartbeat or a migration's second copy cannot fire the
// same silence again.
const DefaultMinDownMemory = 10 * time.Minute

// Hooks let tests observe and interleave with a scanner deterministically.
type Hooks struct {
	// BeforeRemove runs after Kafka acknowledged a batch and before its
	// members are (conditionally) removed from the shard.
	BeforeRemove func(shardID int, batch []shard.Member)
	// Fired runs after a batch's members were removed.
	Fired func(shardID int, batch []shard.Member, removed int)
}

// Options wire a Scanner.
type Options struct {
	Store      *shard.Store
	Dispatcher Dispatcher
	Gate       *Gate
	Layout     LayoutSource
	Metrics    *metrics.Metrics
	Log        *slog.Logger
	Now        func() time.Time
	// RecoveryWindow is how long fired devices are remembered as down (for
	// recovered events), at least MinDownMemory.
	RecoveryWindow time.Duration
	// MinDownMemory overrides DefaultMinDownMemory (tests).
	MinDownMemory time.Duration
	Hooks         Hooks
}

// Scanner runs the scanners of the shards this instance owns.
type Scanner struct {
	cfg   Config
	opts  Options
	sched gocron.Scheduler

	mu      sync.Mutex
	shards  map[int]*shardScanner
	retired map[int]*shardScanner // stopped, maybe with batches still out

	// dispatchCtx outlives the run context so in-flight batches finish on
	// shutdown; it is cancelled when the drain deadline passes.
	dispatchCtx    context.Context
	cancelDispatch context.CancelFunc
	inflight       sync.WaitGroup

	failing atomic.Bool // scans fail (Redis unreachable); logged once per outage
}

// scanFailed counts a failed scan and logs the start of an outage once.
func (s *Scanner) scanFailed(id int, err error) {
	s.opts.Metrics.ScanErrors.Inc()
	if !s.failing.Swap(true) {
		s.opts.Log.Warn("scanners paused: cannot read shards, retrying every interval", "shard", id, "err", err)
	}
}

// scanSucceeded logs the end of an outage once.
func (s *Scanner) scanSucceeded() {
	if s.failing.Load() && s.failing.Swap(false) {
		s.opts.Log.Info("scanners resumed")
	}
}

// New returns a scanner; call SetShards to choose which shards it scans.
func New(cfg Config, opts Options) (*Scanner, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	sched, err := gocron.NewScheduler()
	if err != nil {
		return nil, fmt.Errorf("create scheduler: %w", err)
	}
	s := &Scanner{cfg: cfg, opts: opts, sched: sched, shards: make(map[int]*shardScanner), retired: make(map[int]*shardScanner)}
	s.dispatchCtx, s.cancelDispatch = context.WithCancel(context.Background())
	opts.Gate.OnAdvance(s.onWatermark)
	return s, nil
}

// SetShards makes the scanner run exactly the given shards.
func (s *Scanner) SetShards(ids []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[int]bool, len(ids))
	for _, id := range ids {
		want[id] = true
		if _, ok := s.shards[id]; ok {
			continue
		}
		sc := &shardScanner{s: s, id: id, inflight: make(map[string]bool)}
		job, err := s.sched.NewJob(gocron.DurationJob(s.cfg.Interval), gocron.NewTask(sc.pass),
			gocron.WithSingletonMode(gocron.LimitModeWait),
			gocron.WithStartAt(gocron.WithStartImmediately()))
		if err != nil {
			return fmt.Errorf("schedule shard %d: %w", id, err)
		}
		sc.job = job
		s.shards[id] = sc
	}
	for id, sc := range s.shards {
		if !want[id] {
			sc.stop()
			_ = s.sched.RemoveJob(sc.job.ID())
			delete(s.shards, id)
			s.retired[id] = sc
		}
	}
	return nil
}

// Drain waits, at most d, until the batches a stopped scanner of shard id
// handed to dispatch are acknowledged and removed, so its lease can pass to
// another instance without that one firing them a second time.
func (s *Scanner) Drain(id int, d time.Duration) {
	s.mu.Lock()
	sc := s.retired[id]
	delete(s.retired, id)
	s.mu.Unlock()
	if sc == nil {
		return
	}
	done := make(chan struct{})
	go func() { sc.out.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// Shards returns the shards this scanner runs.
func (s *Scanner) Shards() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.shards))
	for id := range s.shards {
		out = append(out, id)
	}
	return out
}

// Wake asks shard id's scanner for a pass now (no-op if not owned).
func (s *Scanner) Wake(id int) {
	s.mu.Lock()
	sc := s.shards[id]
	s.mu.Unlock()
	if sc != nil {
		sc.wake()
	}
}

func (s *Scanner) onWatermark(wm int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range s.shards {
		if h := sc.held.Load(); h != 0 && h <= wm-s.cfg.Grace.Milliseconds() {
			sc.wake()
		}
	}
}

// Run starts the scanners and stops them when ctx is cancelled: no new pass
// starts, in-flight batches get until drain's deadline to be acknowledged
// and removed, then the rest stays in Redis for the next owner.
func (s *Scanner) Run(ctx context.Context) error {
	s.sched.Start()
	<-ctx.Done()
	return nil
}

// Shutdown stops scanning and waits for in-flight batches until drainCtx
// is done. Call after Run returned.
func (s *Scanner) Shutdown(drainCtx context.Context) error {
	s.mu.Lock()
	for _, sc := range s.shards {
		sc.stop()
	}
	s.mu.Unlock()
	err := s.sched.Shutdown()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-drainCtx.Done():
		s.cancelDispatch()
		<-done
	}
	s.cancelDispatch()
	return err
}

// shardScanner scans one shard. Only its gocron job runs pass (singleton),
// dispatch goroutines only touch the in-flight set under mu.
type shardScanner struct {
	s   *Scanner
	id  int
	job gocron.Job

	out     sync.WaitGroup // batches handed to dispatch and not yet done
	order   sync.RWMutex   // reads of the shard vs. removal + release of a group
	pending atomic.Bool    // a wake-up is queued
	starved atomic.Bool    // the last pass stopped at max_inflight
	// After a failed scan the shard waits backoff (doubling up to 2 s)
	// before it scans again; only its own pass goroutine touches these.
	backoff   time.Duration
	failUntil time.Time
	held      atomic.Int64 // deadline (ms) of the next member due by time but held by the watermark; 0 none
	stopped   atomic.Bool

	mu sync.Mutex
	// inflight holds the members handed to dispatch: true while their
	// batch is out, false once it completed. Completed entries stay until
	// the pass's next read (forgetDone), because a read that began before
	// a batch's removal may still return its members.
	inflight map[string]bool
	done     []string // members marked false since the last pass began
	deleted  int      // deletions since the map was last rebuilt
	active   int      // members with inflight[id] == true
	batches  int
	timer    *time.Timer
	timerAt  int64
}

func (sc *shardScanner) wake() {
	if sc.stopped.Load() || !sc.pending.CompareAndSwap(false, true) {
		return
	}
	if err := sc.job.RunNow(); err != nil {
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
	sc.pending.Store(false)
	if sc.stopped.Load() || time.Now().Before(sc.failUntil) {
		return
	}
	s := sc.s
	ctx := s.dispatchCtx
	batch := s.cfg.BatchSize
	// Pops are gathered into groups of up to groupPops×batch_size members:
	// one produce request and one conditional removal per group, while each
	// pop still takes at most batch_size members.
	var st passState
	defer st.flush(sc)
	// Members in flight are still in the shard, at its front: the read skips
	// as many. order keeps that count in step with the shard (a group's
	// removal and its release from the in-flight set happen together, never
	// between the count and the read). Should the front still hold something
	// else (a write of an already-past deadline), members the read returns
	// that are in flight push the next read further, so a pass always makes
	// progress; what it stepped over is read by the next pass.
	windows := 1 // pops read per round trip: more once pops come back full
	for !sc.stopped.Load() {
		sc.forgetDone()
		upTo := s.opts.Gate.UpTo()
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
		reads, err := s.opts.Store.DueWindows(ctx, sc.id, offset, batch, batch+1, windows)
		sc.order.RUnlock()
		if err != nil {
			if ctx.Err() == nil {
				s.scanFailed(sc.id, err)
				sc.backoff = min(max(2*sc.backoff, s.cfg.Interval), 2*time.Second)
				sc.failUntil = time.Now().Add(sc.backoff)
			}
			return // a tick after the backoff retries
		}
		sc.backoff = 0
		s.scanSucceeded()
		for _, ms := range reads {
			full, next, err := sc.pop(ctx, &st, ms, limit)
			if err != nil {
				if ctx.Err() == nil {
					s.scanFailed(sc.id, err)
				}
				return
			}
			if len(st.group) >= groupPops*batch {
				st.flush(sc)
			}
			if !full {
				sc.arm(next, upTo)
				return
			}
		}
		windows = popsAhead // full pops: keep draining, several per round trip
	}
}

// popsAhead is how many pops a draining pass reads per round trip.
const popsAhead = 4

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
func (sc *shardScanner) pop(ctx context.Context, st *passState, ms []shard.Member, limit float64) (bool, *shard.Member, error) {
	batch := sc.s.cfg.BatchSize
	due := ms[:0:0]
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
		if out, ok := sc.inflight[id]; ok && !out {
			delete(sc.inflight, id)
		}
	}
	// Deleted slots of a Go map stay as tombstones that lengthen every
	// lookup until the map grows; with members cycling through it at the
	// drain rate, rebuild it once deletions outnumber its live entries.
	sc.deleted += len(sc.done)
	if sc.deleted > 4*len(sc.inflight)+1024 {
		fresh := make(map[string]bool, len(sc.inflight))
		for id, out := range sc.inflight {
			fresh[id] = out
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
		sc.inflight[m.ID] = true
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
	d := time.Until(time.UnixMilli(fireAt))
	sc.timer = time.AfterFunc(d, func() {
		// A deadline that is due by the clock waits for the watermark:
		// mark it held so the gate's next advance wakes this shard.
		sc.held.Store(deadline)
		sc.wake()
	})
}

// dispatch hands a batch to dispatch in its own goroutine, removes the
// members once Kafka acknowledged them, and releases them from the in-flight
// set.
func (sc *shardScanner) dispatch(batch []shard.Member, others map[string]copyElsewhere) {
	s := sc.s
	detectedAt := s.opts.Now()
	sc.mu.Lock()
	sc.batches++
	sc.mu.Unlock()
	s.inflight.Add(1)
	sc.out.Add(1)
	go func() {
		defer s.inflight.Done()
		defer sc.out.Done()
		released := false
		defer func() {
			if !released {
				sc.release(batch) // not removed: read again by a later pass
			}
		}()
		ctx := s.dispatchCtx
		fire, err := sc.dropReplays(ctx, batch)
		if err != nil {
			s.opts.Metrics.ScanErrors.Inc()
			return // stays in the shard; the next pass retries
		}
		overrides, err := s.opts.Store.OverridesOf(ctx, sc.id, fire)
		if err != nil {
			s.opts.Metrics.ScanErrors.Inc()
			return // stays in the shard; the next pass retries
		}
		if len(fire) == 0 {
			return
		}
		if err := s.opts.Dispatcher.Timeouts(ctx, sc.id, fire, overrides, detectedAt); err != nil {
			return // shutting down: the members stay for the next owner
		}
		if h := s.opts.Hooks.BeforeRemove; h != nil {
			h(sc.id, fire)
		}
		minDown := s.opts.MinDownMemory
		if minDown == 0 {
			minDown = DefaultMinDownMemory
		}
		remember := max(s.opts.RecoveryWindow, minDown)
		prune := shard.MaxScore(s.opts.Now().Add(-remember).UnixMilli())
		sc.order.Lock()
		var raced []shard.Raced
		removed, err := retry(ctx, func() (n int, err error) {
			n, raced, err = s.opts.Store.Fired(ctx, sc.id, fire, prune)
			return n, err
		})
		sc.release(batch)
		released = true
		sc.order.Unlock()
		if err != nil {
			return
		}
		if len(raced) > 0 && s.opts.RecoveryWindow > 0 {
			if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, sc.reportRaced(ctx, raced) }); err != nil {
				return
			}
		}
		if len(others) > 0 {
			if _, err := retry(ctx, func() (struct{}, error) { return struct{}{}, sc.removeOthers(ctx, others) }); err != nil {
				return
			}
		}
		if h := s.opts.Hooks.Fired; h != nil {
			h(sc.id, fire, removed)
		}
	}()
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
	ids := make([]string, len(batch))
	for k, m := range batch {
		ids[k] = m.ID
	}
	downs, err := sc.s.opts.Store.DownScores(ctx, sc.id, ids)
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

func (sc *shardScanner) release(batch []shard.Member) {
	sc.mu.Lock()
	for _, m := range batch {
		sc.inflight[m.ID] = false
		sc.active--
		sc.done = append(sc.done, m.ID)
	}
	sc.batches--
	sc.mu.Unlock()
	if sc.starved.Swap(false) {
		sc.wake() // the last pass stopped at max_inflight: go on draining
	}
}

// retry runs fn with exponential backoff until it succeeds or ctx ends.
func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	backoff := 10 * time.Millisecond
	for {
		v, err := fn()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}
