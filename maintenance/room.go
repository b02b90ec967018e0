package maintenance

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// DefaultPoll is how often a Room reads the windows' version counter: a
// start or an end applies on every instance within a poll and a reload,
// well inside the second §15 allows.
const DefaultPoll = 250 * time.Millisecond

// DefaultPruneEvery is how often a Room drops the held records that no
// longer stand (shard.Store.PruneHeld): a device that beat through a
// window leaves its record behind, one per device at most.
const DefaultPruneEvery = 10 * time.Minute

// Options wire a Room.
type Options struct {
	Store *shard.Store
	Log   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Poll is how often the version counter is read; 0 means DefaultPoll.
	Poll time.Duration
	// Shards is the number of shards whose held records Run prunes (the
	// layout's Shards); nil: Run prunes nothing.
	Shards func() int
	// PruneEvery is how often they are pruned; 0 means DefaultPruneEvery.
	PruneEvery time.Duration
}

// Room is an instance's view of the maintenance windows: what the
// scanners ask when a deadline passes (Holding, MayHold) and what /status
// lists. Load it before the scanners fire anything; Run keeps it fresh.
type Room struct {
	opts    Options
	idx     atomic.Pointer[Index]
	version atomic.Int64
}

// New returns a Room that holds nothing until Load.
func New(opts Options) *Room {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.PruneEvery <= 0 {
		opts.PruneEvery = DefaultPruneEvery
	}
	r := &Room{opts: opts}
	r.idx.Store(NewIndex(nil, 0))
	r.version.Store(-1)
	return r
}

// Load reads every kept window and indexes them.
func (r *Room) Load(ctx context.Context) error {
	v, ws, err := r.opts.Store.Windows(ctx)
	if err != nil {
		return err
	}
	r.idx.Store(NewIndex(ws, r.opts.Now().UnixMilli()))
	if old := r.version.Swap(v); old != v {
		r.opts.Log.Info("maintenance windows loaded", "windows", len(ws), "version", v)
	}
	return nil
}

// refresh reloads the windows when their version moved.
func (r *Room) refresh(ctx context.Context) error {
	v, err := r.opts.Store.WindowsVersion(ctx)
	if err != nil {
		return err
	}
	if v == r.version.Load() {
		return nil
	}
	return r.Load(ctx)
}

// Run keeps the view fresh until ctx is cancelled, and prunes the held
// records that no longer stand. While Redis cannot be read the last view
// stands: windows still end by their time.
func (r *Room) Run(ctx context.Context) error {
	outage := retry.Outage{Log: r.opts.Log, Down: "cannot read maintenance windows", Up: "maintenance windows readable again"}
	t := time.NewTicker(r.opts.Poll)
	defer t.Stop()
	prune := time.NewTicker(r.opts.PruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune.C:
			r.prune(ctx)
			continue
		case <-t.C:
		}
		if err := r.refresh(ctx); err != nil {
			if ctx.Err() == nil {
				outage.Failed(err)
			}
			continue
		}
		outage.Succeeded()
	}
}

// prune drops the held records that no longer stand, shard by shard: an
// HSCAN of an empty hash per shard when no window ever held anything.
func (r *Room) prune(ctx context.Context) {
	if r.opts.Shards == nil {
		return
	}
	n := r.opts.Shards()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if _, err := r.opts.Store.PruneHeld(ctx, i, n); err != nil {
			r.opts.Log.Warn("prune held devices", "shard", i, "err", err)
			return
		}
	}
}

// Holding returns the id and end of the open window that holds device id
// (of class) whose deadline deadlineMs passed, at nowMs (see
// Index.Holding).
func (r *Room) Holding(id, class string, deadlineMs, nowMs int64) (window string, endMs int64, ok bool) {
	w, ok := r.idx.Load().Holding(id, class, deadlineMs, nowMs)
	return w.ID, w.EndMs(), ok
}

// MayHold reports whether a member at deadlineMs with timeoutMs may be one
// a window moved (Index.MayHold).
func (r *Room) MayHold(deadlineMs, timeoutMs int64) bool {
	return r.idx.Load().MayHold(deadlineMs, timeoutMs)
}

// Active reports whether any window is kept, open or ended.
func (r *Room) Active() bool { return len(r.idx.Load().windows) > 0 }

// Open returns the windows open now.
func (r *Room) Open() []shard.Window { return r.idx.Load().Open(r.opts.Now().UnixMilli()) }

// HeldOpen sums heldBy (a window's id → the devices it holds) over the
// windows open now, without copying them (a /metrics scrape's sum).
func (r *Room) HeldOpen(heldBy map[string]int64) int64 {
	x, now := r.idx.Load(), r.opts.Now().UnixMilli()
	var held int64
	for k := range x.windows {
		if w := &x.windows[k]; w.OpenAt(now) {
			held += heldBy[w.ID]
		}
	}
	return held
}
