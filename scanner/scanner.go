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
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/internal/testsignal"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// Dispatcher publishes the timeouts of due members and returns once Kafka
// acknowledged all of them (retrying meanwhile), or ctx's error.
type Dispatcher interface {
	Timeouts(ctx context.Context, shardID int, due []shard.Member, overrides map[string]int64, detectedAt time.Time) error
	// Raced publishes the recoveries of devices that beat again while
	// their timeout was being published (see shard.Store.Fired);
	// overrides holds the per-device timeouts of their current scores.
	Raced(ctx context.Context, shardID int, raced []shard.Raced, overrides map[string]int64) error
	// Noted publishes due members like Timeouts, each with what notes
	// says of it (a member without a note is a plain timeout): its family
	// (SPEC §14: its parent, unreachable, children_held) and the
	// maintenance window that released it (§15: maintenance_id, not
	// counted toward storms).
	Noted(ctx context.Context, shardID int, due []shard.Member, overrides map[string]int64, notes map[string]timeouts.Note, detectedAt time.Time) error
}

// defaultMinDownMemory is how long a fired device is remembered as down even
// with recovered events disabled or a short recovery window: long enough
// that a replayed heartbeat or a migration's second copy cannot fire the
// same silence again.
const defaultMinDownMemory = 10 * time.Minute

// Hooks let tests interleave with a scanner deterministically: each runs
// on the scanner's goroutine, which waits for it.
type Hooks struct {
	// BeforeRemove runs after Kafka acknowledged a batch and before its
	// members are (conditionally) removed from the shard.
	BeforeRemove func(shardID int, batch []shard.Member)
}

// ScannerTestSignals tell the tests that Init them what a Scanner did
// (internal/testsignal); off, they cost a nil check.
type ScannerTestSignals struct {
	// Fired receives the id of every member removed after Kafka
	// acknowledged its timeout.
	Fired testsignal.Signal[string]
}

// Init turns every signal on; call it before Run.
func (ts *ScannerTestSignals) Init(tb testsignal.TB) { ts.Fired.Init(tb) }

// Options wire a Scanner.
type Options struct {
	Store      *shard.Store
	Dispatcher Dispatcher
	Gate       *Gate
	Layout     LayoutSource
	Metrics    *metrics.Metrics
	Log        *slog.Logger
	// Now is the clock that decides what is due, when a shard's next
	// deadline is and how long a failing shard waits; nil means time.Now.
	Now func() time.Time
	// RecoveryWindow is how long fired devices are remembered as down (for
	// recovered events), at least MinDownMemory.
	RecoveryWindow time.Duration
	// MinDownMemory overrides defaultMinDownMemory (tests).
	MinDownMemory time.Duration
	// DrainTimeout bounds how long Run, once its ctx is cancelled, waits for
	// the batches in flight to be acknowledged and removed before it
	// cancels them; what is left stays in Redis for the shard's next owner.
	// Default: defaultDrainTimeout.
	DrainTimeout time.Duration
	// Timing returns a member's deadline (without ingest.coalesce_window's
	// padding) and its timeout, in Unix ms and ms: what dispatch reports.
	// The storm guard's re-entry needs it (reenter.go); nil turns it off.
	Timing func(id string, score float64, overrides map[string]int64) (deadlineMs, timeoutMs int64)
	// Maintenance says which due devices a maintenance window holds
	// (maintain.go); nil, or a nil Timing, turns holding off.
	Maintenance Maintenance
	// ClassOf names the class a score carries ("" for none), for windows
	// that match a class.
	ClassOf func(score float64) string
	// Gateways holds children due while their parent is silent
	// (gateways.go); nil turns it off.
	Gateways *GatewaysConfig
	Hooks    Hooks
}

// defaultDrainTimeout is the drain bound of a Scanner without DrainTimeout:
// the default shutdown_timeout.
const defaultDrainTimeout = 10 * time.Second

// passStopTimeout bounds how long a stop waits for the passes under way
// (gocron's own bound for its jobs).
const passStopTimeout = 10 * time.Second

// Scanner runs the scanners of the shards this instance owns.
type Scanner struct {
	cfg   Config
	opts  Options
	sched gocron.Scheduler

	mu      sync.Mutex
	shards  map[int]*shardScanner
	retired map[int]*shardScanner // stopped, maybe with batches still out

	// woken holds the shards whose pass was asked for and not yet handed
	// to a runner. Waking never blocks, so timers, the gate, the wake
	// listener and this process's writes wake shards from wherever they
	// run; Run starts the passes.
	wakeMu     sync.Mutex
	woken      []*shardScanner
	wokenSpare []*shardScanner // Run's: the buffer woken swaps with
	wakeKick   chan struct{}
	runners    passRunners

	// held holds the shards whose next deadline is due by the clock and
	// waits for the watermark (shardScanner.held): a watermark advance
	// looks at them only, not at every shard.
	heldMu sync.Mutex
	held   map[*shardScanner]struct{}

	// The poll's slice count, the next slice, and its buffers (one poll
	// at a time: a singleton job).
	pollSlices int
	pollNext   int
	polled     []*shardScanner
	pollIDs    []int

	// dispatchCtx is Run's context without its cancellation, so batches in
	// flight finish after Run's ctx is cancelled; Run cancels it once the
	// drain deadline passes. Run sets it before it starts the scheduler,
	// and only scheduled passes (and the dispatches they start) read it.
	dispatchCtx context.Context
	inflight    sync.WaitGroup

	// scans is the outage of the shards' reads (Redis unreachable), one for
	// all shards: they fail together.
	scans retry.Outage
	// ran is set by Run (Close then leaves the scheduler to it).
	ran atomic.Bool

	TestSignals ScannerTestSignals
}

// scanFailed counts a failed scan and logs the start of an outage once.
func (s *Scanner) scanFailed(id int, err error) {
	s.opts.Metrics.ScanErrors.Inc()
	s.scans.Failed(err, "shard", id)
}

// New returns a scanner; call SetShards to choose which shards it scans
// and Run to run it.
func New(cfg Config, opts Options) (*Scanner, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = defaultDrainTimeout
	}
	sched, err := gocron.NewScheduler()
	if err != nil {
		return nil, fmt.Errorf("create scheduler: %w", err)
	}
	s := &Scanner{cfg: cfg, opts: opts, sched: sched, shards: make(map[int]*shardScanner), retired: make(map[int]*shardScanner),
		wakeKick: make(chan struct{}, 1), held: make(map[*shardScanner]struct{})}
	s.scans.Log = opts.Log
	s.scans.Down = "scanners paused: cannot read shards, retrying every interval"
	s.scans.Up = "scanners resumed"
	// One poll for all shards, a slice of them per round trip (see poll): a
	// shard costs a command per interval, not a round trip and a scheduled
	// job run of its own.
	s.pollSlices = pollSlices(cfg.Interval)
	if _, err := sched.NewJob(gocron.DurationJob(cfg.Interval/time.Duration(s.pollSlices)), gocron.NewTask(s.poll),
		gocron.WithSingletonMode(gocron.LimitModeReschedule)); err != nil {
		return nil, fmt.Errorf("schedule the poll: %w", err)
	}
	opts.Gate.onAdvance(s.onWatermark)
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
		sc := s.retired[id]
		if sc != nil {
			// Regained before its batches left (a lease lost and won
			// back across a Redis outage): the same scanner goes on, so
			// the members it still has in flight are not fired again.
			delete(s.retired, id)
			sc.pending.Store(false)
			sc.stopped.Store(false)
		} else {
			sc = &shardScanner{s: s, id: id, inflight: make(map[string]struct{}),
				backoff: retry.Backoff{Min: min(s.cfg.Interval, minScanBackoff), Max: maxScanBackoff}}
		}
		// The shard passes once now (once Run runs), then whenever it is
		// woken: by its timer, a write, the poll, the watermark or a
		// completed group.
		s.shards[id] = sc
		sc.wake()
	}
	for id, sc := range s.shards {
		if !want[id] {
			sc.stop()
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

// wake asks shard id's scanner for a pass now. It never blocks, and
// reports whether this scanner scans the shard.
func (s *Scanner) wake(id int) bool {
	s.mu.Lock()
	sc := s.shards[id]
	s.mu.Unlock()
	return sc != nil && sc.wake()
}

// wakeAll asks every shard's scanner for a pass now.
func (s *Scanner) wakeAll() {
	s.mu.Lock()
	all := make([]*shardScanner, 0, len(s.shards))
	for _, sc := range s.shards {
		all = append(all, sc)
	}
	s.mu.Unlock()
	for _, sc := range all {
		sc.wake()
	}
}

// woke queues sc's pass for Run to start.
func (s *Scanner) woke(sc *shardScanner) {
	s.wakeMu.Lock()
	s.woken = append(s.woken, sc)
	s.wakeMu.Unlock()
	select {
	case s.wakeKick <- struct{}{}:
	default:
	}
}

// startWoken hands the passes of the woken shards to the scheduler.
func (s *Scanner) startWoken() {
	s.wakeMu.Lock()
	q := s.woken
	s.woken = s.wokenSpare[:0]
	s.wakeMu.Unlock()
	for k, sc := range q {
		q[k] = nil
		if sc.stopped.Load() {
			// Not started: a later wake-up may ask again.
			sc.pending.Store(false)
			continue
		}
		s.runners.pass(sc)
	}
	s.wokenSpare = q[:0]
}

// onWatermark wakes the shards whose held deadline the watermark passed.
func (s *Scanner) onWatermark(wm int64) {
	limit := wm - s.cfg.Grace.Milliseconds()
	var due []*shardScanner
	s.heldMu.Lock()
	for sc := range s.held {
		if h := sc.held.Load(); h != 0 && h <= limit {
			due = append(due, sc)
		}
	}
	s.heldMu.Unlock()
	for _, sc := range due {
		sc.wake()
	}
}

// Run scans the shards set by SetShards until ctx is cancelled, then stops
// them: no new pass starts, and the batches in flight get DrainTimeout to be
// acknowledged by Kafka and removed from their shards; the rest stays in
// Redis for the shard's next owner. Run returns only once every dispatch it
// started has, so the Dispatcher may be closed after it. Call it once.
func (s *Scanner) Run(ctx context.Context) error {
	s.ran.Store(true)
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s.dispatchCtx = dctx
	rctx, stopRunners := context.WithCancel(context.Background())
	s.runners.start(rctx, passRunnerCount)
	s.sched.Start()
	for {
		select {
		case <-ctx.Done():
			s.stopAll(cancel, stopRunners)
			return nil
		case <-s.wakeKick:
			s.startWoken()
		}
	}
}

// Close releases the scheduler of a Scanner that never ran: gocron starts
// its goroutine when the scheduler is created, and only a shutdown ends it.
// After Run, which shuts it down itself, Close does nothing.
func (s *Scanner) Close() error {
	if s.ran.Load() {
		return nil
	}
	return s.sched.Shutdown()
}

// stopAll stops every shard's pass, then waits for the batches in flight
// until DrainTimeout has passed, and after that for their cancellation.
// Passes or a scheduler that do not stop in time are logged, not returned:
// the batches are drained either way.
func (s *Scanner) stopAll(cancelDispatch, stopRunners context.CancelFunc) {
	s.mu.Lock()
	for _, sc := range s.shards {
		sc.stop()
	}
	s.mu.Unlock()
	stopRunners()
	if err := s.sched.Shutdown(); err != nil {
		s.opts.Log.Warn("scanner shutdown", "err", err)
	}
	if !s.runners.wait(passStopTimeout) {
		s.opts.Log.Warn("scanner shutdown: passes still under way", "waited", passStopTimeout)
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	t := time.NewTimer(s.opts.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cancelDispatch()
		<-done
	}
}
