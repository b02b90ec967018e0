package namer

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm"
)

// Options wire a Namer.
type Options struct {
	Store *shard.Store
	// Tally is this process's count of what dispatch published, moved to
	// Redis every tick.
	Tally *Tally
	// MinTimeout is timeouts.min: a hold that lasted this long has held a
	// deadline back, and is a storm.
	MinTimeout time.Duration
	// Leader reports whether this instance names storms now (the owner of
	// shard 0's scanner lease, like the migration sweeper): one at a time.
	// Nil in a process without scanners, which only counts.
	Leader func() bool
	// Announce publishes a storm_started or storm_ended event (value) with
	// the key storm/<id>, returning once Kafka acknowledged it
	// (dispatch.Publisher.StormEvent).
	Announce func(ctx context.Context, id string, value []byte) error
	// Tracked returns the devices tracked (the sum of the shard sizes).
	Tracked func(ctx context.Context) (int64, error)
	Metrics *metrics.Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// Namer names storms. Every instance counts the timeouts and recoveries it
// published (Tally) into Redis; the leader declares a storm when more
// than storm.threshold of the tracked devices, and more than
// storm.min_devices, timed out within storm.window, or when a hold has
// lasted timeouts.min (a dead pipe, caught before it fired anything), and
// ends it once a whole window passed without that and without a hold. A
// hold that ends or expires names its storm itself, in the step that lets
// its deadlines fire (see shard's stall_end.lua and stall_expire.lua), so
// that each of them carries the storm_id.
type Namer struct {
	cfg  storm.Config
	opts Options

	tracked   int64
	trackedAt time.Time
}

// New returns a Namer.
func New(cfg storm.Config, opts Options) *Namer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Namer{cfg: cfg, opts: opts}
}

// namerTick is how often counts go to Redis and the leader looks.
const namerTick = 250 * time.Millisecond

// Run counts and names until ctx is cancelled.
func (n *Namer) Run(ctx context.Context) error {
	t := time.NewTicker(namerTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			n.opts.Tally.flush(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
		}
		n.opts.Tally.flush(ctx)
		// A process without scanners (no Leader) steps to read which
		// storm is being named, for its tally; one with scanners steps
		// while it leads, its gate reading the storm for the tally.
		if n.opts.Leader == nil || n.opts.Leader() {
			if err := n.step(ctx); err != nil && ctx.Err() == nil {
				n.opts.Log.Debug("storm naming", "err", err)
			}
		}
	}
}

// event is a storm_started or storm_ended event.
type event struct {
	Type        string `json:"type"`
	StormID     string `json:"storm_id"`
	StartedAtMs int64  `json:"started_at_ms"`
	Devices     *int64 `json:"devices,omitempty"`
	EndedAtMs   int64  `json:"ended_at_ms,omitempty"`
	TimedOut    *int64 `json:"timed_out,omitempty"`
	Recovered   *int64 `json:"recovered,omitempty"`
}

// step reads the storm guard's state and names, announces or ends a storm.
func (n *Namer) step(ctx context.Context) error {
	gs, err := n.opts.Store.ReadGate(ctx)
	if err != nil {
		return err
	}
	seen := ""
	if gs.Storm != nil {
		seen = gs.Storm.ID
	}
	n.opts.Tally.sawStorm(seen)
	if n.opts.Leader == nil || !n.opts.Leader() {
		return nil // this process only counts
	}
	now := n.opts.Now()
	nowMs := now.UnixMilli()
	count, err := n.opts.Store.FiredSince(ctx, nowMs-n.cfg.Window.Milliseconds())
	if err != nil {
		return err
	}
	if now.Sub(n.trackedAt) >= n.cfg.Window && n.opts.Tracked != nil {
		if t, err := n.opts.Tracked(ctx); err == nil {
			n.tracked, n.trackedAt = t, now
		}
	}
	surge := float64(count) > n.cfg.Threshold*float64(n.tracked) && count > int64(n.cfg.MinDevices)
	hold := gs.Hold != nil && !gs.Hold.Expired
	switch st := gs.Storm; {
	case st == nil:
		if surge || (hold && nowMs-gs.Hold.SinceMs >= n.opts.MinTimeout.Milliseconds()) {
			named, err := n.opts.Store.NameStorm(ctx, storm.NewID(now), nowMs)
			if err != nil {
				return err
			}
			n.opts.Log.Warn("storm declared", "storm_id", named.ID, "timeouts_in_window", count, "tracked", n.tracked, "hold", hold)
		}
	case !st.Announced:
		v, _ := json.Marshal(event{Type: "storm_started", StormID: st.ID, StartedAtMs: st.StartedMs, Devices: &count})
		if err := n.opts.Announce(ctx, st.ID, v); err != nil {
			return err
		}
		if n.opts.Metrics != nil {
			n.opts.Metrics.Storms.Inc()
		}
		return n.opts.Store.AnnouncedStorm(ctx, st.ID)
	default:
		quiet := st.StartedMs
		for _, h := range gs.Held {
			quiet = max(quiet, h.EndMs)
		}
		if surge || gs.Hold != nil || nowMs-quiet < n.cfg.Window.Milliseconds() {
			return nil
		}
		n.opts.Tally.flush(ctx)
		timedOut, recovered, err := n.opts.Store.StormTally(ctx, st.ID)
		if err != nil {
			return err
		}
		v, _ := json.Marshal(event{Type: "storm_ended", StormID: st.ID, StartedAtMs: st.StartedMs, EndedAtMs: nowMs, TimedOut: &timedOut, Recovered: &recovered})
		if err := n.opts.Announce(ctx, st.ID, v); err != nil {
			return err
		}
		n.opts.Log.Info("storm ended", "storm_id", st.ID, "timed_out", timedOut, "recovered", recovered)
		return n.opts.Store.EndStorm(ctx, st.ID)
	}
	return nil
}
