package scanner

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// Gate tracks the firing watermark: the minimum over all partitions of the
// signals topic of wm(p), as ingest instances raise them in Redis. A
// partition without a watermark, or an unknown partition count, holds firing
// back entirely.
type Gate struct {
	store     *shard.Store
	poll      time.Duration
	idle      time.Duration
	grace     time.Duration
	stallWarn time.Duration
	now       func() time.Time
	log       *slog.Logger

	wm atomic.Int64 // min over partitions, Unix ms; 0 = none
	// waiting is set while a scanner holds a deadline that is due by the
	// clock and waits for the watermark (Scanner.setHeld); only then does
	// the gate poll every poll, and kick wakes it when waiting begins.
	waiting atomic.Bool
	kick    chan struct{}
	// readMu orders the reads of the watermarks hash, so an earlier read's
	// state never overwrites a later one's; readAt is when the last
	// successful read was sent (Unix ns).
	readMu  sync.Mutex
	readAt  atomic.Int64
	mu      sync.Mutex
	waiters []func(wm int64)
	// known holds, per partition, the highest wm(p) seen: polled from
	// Redis or handed over by this process's ingest (Raised), which may
	// be ahead of Redis's until its raise lands. Each is a moment before
	// which every record of its partition is in Redis, so the minimum over
	// them is one for all. n is the partition count as Redis last told it.
	known   map[int]int64
	n       int
	stalled atomic.Bool
	// started is when Run began (Unix ns), 0 before: a pass reads the
	// watermarks (fresh) on its own goroutine, and may before Run has.
	started atomic.Int64

	// The storm guard's state as the last poll read it (package storm):
	// holdFrom caps firing while a hold lasts (0: none does); held are the
	// ended holds whose deadlines re-enter (see reenter.go); storm is the
	// storm being named.
	holdFrom atomic.Int64
	held     atomic.Pointer[[]shard.Held]
	storm    atomic.Pointer[shard.StormName]
}

// GateOptions wire a Gate.
type GateOptions struct {
	Store *shard.Store
	// Poll is how often the gate reads the watermarks while a deadline
	// waits for the watermark. Firing never decides on an older read than
	// two polls: a pass reads the watermarks itself when the last read is
	// older (Gate.fresh).
	Poll time.Duration
	// IdlePoll is how often it reads them otherwise; at most Poll means
	// always every Poll.
	IdlePoll time.Duration
	// Grace holds firing back this much behind the watermark
	// (scanner.grace).
	Grace time.Duration
	// StallAfter: a watermark more than this behind now is logged as
	// stalled (Gate.Stalled).
	StallAfter time.Duration
	Log        *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewGate returns a gate; Run polls the watermarks.
func NewGate(opts GateOptions) *Gate {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Gate{store: opts.Store, poll: opts.Poll, idle: max(opts.IdlePoll, opts.Poll), grace: opts.Grace,
		stallWarn: opts.StallAfter, now: opts.Now, log: opts.Log, kick: make(chan struct{}, 1)}
}

// Watermark is min over partitions of wm(p) in Unix ms (0 when unknown).
func (g *Gate) Watermark() int64 { return g.wm.Load() }

// upTo is the latest deadline (Unix ms) that may fire at now (the
// scanner's clock): min(now, watermark) − grace. While a hold lasts,
// nothing after its start fires, whatever the watermarks of the
// partitions that flow.
func (g *Gate) upTo(now time.Time) int64 {
	t := now.UnixMilli()
	if wm := g.wm.Load(); wm < t {
		t = wm
	}
	if h := g.holdFrom.Load(); h > 0 && h < t {
		t = h
	}
	return t - g.grace.Milliseconds()
}

// endedHolds returns the ended holds, as the last poll read them.
func (g *Gate) endedHolds() []shard.Held {
	if h := g.held.Load(); h != nil {
		return *h
	}
	return nil
}

// StormID is the id of the storm being named, "" when none is. It is read
// in the same poll as the holds, so a deadline a lifted hold lets fire
// finds the storm the lift named.
func (g *Gate) StormID() string {
	if s := g.storm.Load(); s != nil {
		return s.ID
	}
	return ""
}

// onAdvance registers fn to be called whenever the watermark moves forward:
// from the gate's goroutine after a poll, or from the caller of Raised. fn
// must not block; calls may overlap, and one may bring an older watermark
// than another already brought.
func (g *Gate) onAdvance(fn func(wm int64)) {
	g.mu.Lock()
	g.waiters = append(g.waiters, fn)
	g.mu.Unlock()
}

// refresh reads the watermarks once.
func (g *Gate) refresh(ctx context.Context) error {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	return g.read(ctx)
}

// fresh reads the watermarks unless the last read was sent within two
// polls, so that a pass never fires on an older view of the other
// instances' watermarks and holds than a gate polling every poll would
// give it. A failed read leaves the view as it was; the gate's own loop
// reports the outage.
// A read in flight when it is called is waited for, not repeated, if it
// was sent within those two polls.
func (g *Gate) fresh(ctx context.Context) {
	since := g.now().UnixNano() - 2*g.poll.Nanoseconds()
	if g.readAt.Load() >= since {
		return
	}
	g.readMu.Lock()
	defer g.readMu.Unlock()
	if g.readAt.Load() < since {
		_ = g.read(ctx)
	}
}

// setWaiting records whether any deadline waits for the watermark; when
// one starts to, the gate polls at once and then every poll.
func (g *Gate) setWaiting(w bool) {
	if g.waiting.Swap(w) == w || !w {
		return
	}
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// read is refresh with readMu held.
func (g *Gate) read(ctx context.Context) error {
	sent := g.now().UnixNano()
	st, err := g.store.ReadGate(ctx)
	if err != nil {
		return err
	}
	g.readAt.Store(sent)
	g.mu.Lock()
	g.n = st.Partitions
	g.merge(st.Watermarks)
	g.mu.Unlock()
	// The holds first: a lifted hold's ended record and the storm it named
	// are in place before the scanners are woken to fire past it.
	held := st.Held
	g.held.Store(&held)
	g.storm.Store(st.Storm)
	var from int64
	if st.Hold != nil && !st.Hold.Expired {
		from = max(st.Hold.FromMs, 1)
	}
	was := g.holdFrom.Swap(from)
	g.recompute()
	if was != 0 && (from == 0 || from > was) {
		g.mu.Lock()
		ws := g.waiters
		g.mu.Unlock()
		g.notify(ws, g.wm.Load()) // the hold lifted: what it held is due
	}
	g.checkStall()
	return nil
}

// Raised takes the watermarks of batches this process's ingest has just
// written, so a local write wakes the scanners at once instead of at the
// next poll; partitions of other instances keep their polled values. The
// minimum is recomputed and the scanners woken on the caller's goroutine,
// not handed to the gate's: that one spends most of its time in a poll's
// round trip to Redis, and on a busy machine a hand-over waiting for it
// was late by that round trip. It never blocks.
func (g *Gate) Raised(wms map[int]int64) {
	g.mu.Lock()
	g.merge(wms)
	min, ws := g.advance()
	g.mu.Unlock()
	g.notify(ws, min)
}

// recompute notifies the waiters if the known watermarks moved the minimum.
func (g *Gate) recompute() {
	g.mu.Lock()
	min, ws := g.advance()
	g.mu.Unlock()
	g.notify(ws, min)
}

// merge raises the known watermarks to wms. Call with mu held.
func (g *Gate) merge(wms map[int]int64) {
	if g.known == nil {
		g.known = make(map[int]int64)
	}
	for p, v := range wms {
		if v > g.known[p] {
			g.known[p] = v
		}
	}
}

// advance recomputes the minimum and, when it moved forward, stores it and
// returns it with the waiters to notify. Call with mu held.
func (g *Gate) advance() (int64, []func(int64)) {
	min := int64(math.MaxInt64)
	if g.n == 0 {
		min = 0
	}
	for p := 0; p < g.n; p++ {
		if v := g.known[p]; v < min {
			min = v
		}
	}
	if min <= g.wm.Load() {
		return 0, nil
	}
	g.wm.Store(min)
	return min, g.waiters
}

func (g *Gate) notify(ws []func(int64), wm int64) {
	for _, fn := range ws {
		fn(wm)
	}
}

func (g *Gate) checkStall() {
	wm := g.wm.Load()
	if wm == 0 {
		if s := g.started.Load(); s == 0 || g.now().UnixNano()-s < g.stallWarn.Nanoseconds() {
			return // ingest is starting: no watermark yet is not a stall
		}
	}
	lag := g.now().UnixMilli() - wm
	stalled := lag > g.stallWarn.Milliseconds()
	if g.stalled.Swap(stalled) == stalled {
		return
	}
	switch {
	case stalled && wm == 0:
		g.log.Warn("no watermark yet: firing is held back until ingest has read every signals partition")
	case stalled:
		g.log.Warn("watermark stalled: firing is held back until ingest catches up", "lag", time.Duration(lag)*time.Millisecond)
	default:
		g.log.Info("watermark caught up", "lag", time.Duration(lag)*time.Millisecond)
	}
}

// Stalled reports whether the watermark is more than the stall threshold
// behind now.
func (g *Gate) Stalled() bool {
	return g.stalled.Load()
}

// Run polls the watermarks until ctx is cancelled: every poll while a
// deadline waits for the watermark, every idle otherwise. Nothing waiting,
// nothing is late for want of a fresher read, and an instance whose shards
// have nothing due reads the hash a few times a second instead of hundreds.
func (g *Gate) Run(ctx context.Context) error {
	g.started.Store(g.now().UnixNano())
	t := time.NewTimer(0)
	defer t.Stop()
	outage := retry.Outage{Log: g.log, Down: "cannot read watermarks", Up: "watermarks readable again"}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-g.kick:
		}
		if err := g.refresh(ctx); err != nil {
			if ctx.Err() == nil {
				outage.Failed(err)
			}
		} else {
			outage.Succeeded()
		}
		next := g.idle
		if g.waiting.Load() {
			next = g.poll
		}
		t.Reset(next)
	}
}
