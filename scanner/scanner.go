package scanner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/retry"
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
	// Now is the clock that decides what is due, when a shard's next
	// deadline is and how long a failing shard waits; nil means time.Now.
	Now func() time.Time
	// RecoveryWindow is how long fired devices are remembered as down (for
	// recovered events), at least MinDownMemory.
	RecoveryWindow time.Duration
	// MinDownMemory overrides DefaultMinDownMemory (tests).
	MinDownMemory time.Duration
	// DrainTimeout bounds how long Run, once its ctx is cancelled, waits for
	// the batches in flight to be acknowledged and removed before it
	// cancels them; what is left stays in Redis for the shard's next owner.
	// Default: DefaultDrainTimeout.
	DrainTimeout time.Duration
	Hooks        Hooks
}

// DefaultDrainTimeout is the drain bound of a Scanner without DrainTimeout:
// the default shutdown_timeout.
const DefaultDrainTimeout = 10 * time.Second

// Scanner runs the scanners of the shards this instance owns.
type Scanner struct {
	cfg   Config
	opts  Options
	sched gocron.Scheduler

	mu      sync.Mutex
	shards  map[int]*shardScanner
	retired map[int]*shardScanner // stopped, maybe with batches still out

	// dispatchCtx is Run's context without its cancellation, so batches in
	// flight finish after Run's ctx is cancelled; Run cancels it once the
	// drain deadline passes. Run sets it before it starts the scheduler,
	// and only scheduled passes (and the dispatches they start) read it.
	dispatchCtx context.Context
	inflight    sync.WaitGroup

	// scans is the outage of the shards' reads (Redis unreachable), one for
	// all shards: they fail together.
	scans retry.Outage
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
		opts.DrainTimeout = DefaultDrainTimeout
	}
	sched, err := gocron.NewScheduler()
	if err != nil {
		return nil, fmt.Errorf("create scheduler: %w", err)
	}
	s := &Scanner{cfg: cfg, opts: opts, sched: sched, shards: make(map[int]*shardScanner), retired: make(map[int]*shardScanner)}
	s.scans.Log = opts.Log
	s.scans.Down = "scanners paused: cannot read shards, retrying every interval"
	s.scans.Up = "scanners resumed"
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
		sc := s.retired[id]
		if sc != nil {
			// Regained before its batches left (a lease lost and won
			// back across a Redis outage): the same scanner goes on, so
			// the members it still has in flight are not fired again.
			delete(s.retired, id)
			sc.stopped.Store(false)
		} else {
			sc = &shardScanner{s: s, id: id, inflight: make(map[string]struct{}),
				backoff: retry.Backoff{Min: min(s.cfg.Interval, maxScanBackoff), Max: maxScanBackoff}}
		}
		job, err := s.sched.NewJob(gocron.DurationJob(s.cfg.Interval), gocron.NewTask(sc.pass),
			gocron.WithSingletonMode(gocron.LimitModeWait),
			gocron.WithStartAt(gocron.WithStartImmediately()))
		if err != nil {
			return fmt.Errorf("schedule shard %d: %w", id, err)
		}
		sc.mu.Lock()
		sc.job = job
		sc.mu.Unlock()
		s.shards[id] = sc
	}
	for id, sc := range s.shards {
		if !want[id] {
			sc.stop()
			sc.mu.Lock()
			job := sc.job
			sc.mu.Unlock()
			_ = s.sched.RemoveJob(job.ID())
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

// Run scans the shards set by SetShards until ctx is cancelled, then stops
// them: no new pass starts, and the batches in flight get DrainTimeout to be
// acknowledged by Kafka and removed from their shards; the rest stays in
// Redis for the shard's next owner. Run returns only once every dispatch it
// started has, so the Dispatcher may be closed after it. Call it once.
func (s *Scanner) Run(ctx context.Context) error {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s.dispatchCtx = dctx
	s.sched.Start()
	<-ctx.Done()
	s.stopAll(cancel)
	return nil
}

// stopAll stops every shard's pass, then waits for the batches in flight
// until DrainTimeout has passed, and after that for their cancellation.
// A scheduler that does not stop in time is logged, not returned: the
// batches are drained either way.
func (s *Scanner) stopAll(cancelDispatch context.CancelFunc) {
	s.mu.Lock()
	for _, sc := range s.shards {
		sc.stop()
	}
	s.mu.Unlock()
	if err := s.sched.Shutdown(); err != nil {
		s.opts.Log.Warn("scanner shutdown", "err", err)
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
