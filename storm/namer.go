package storm

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
)

// Announcer publishes a storm event with the key storm/<id>
// (dispatch.Publisher.StormEvent).
type Announcer interface {
	StormEvent(ctx context.Context, id string, value []byte) error
}

// GateView is what the firing gate of this process read last
// (scanner.Gate); nil in a process without scanners.
type GateView interface {
	StormID() string
}

// NamerOptions wire a Namer.
type NamerOptions struct {
	Store *shard.Store
	// MinTimeout is timeouts.min: a hold that lasted this long has held a
	// deadline back, and is a storm.
	MinTimeout time.Duration
	Gate       GateView
	// Leader reports whether this instance names storms now (the owner of
	// shard 0's scanner lease, like the migration sweeper): one at a time.
	// Nil in a process without scanners, which only counts.
	Leader    func() bool
	Announcer Announcer
	// Tracked returns the devices tracked (the sum of the shard sizes).
	Tracked func(ctx context.Context) (int64, error)
	Metrics *metrics.Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// Namer names storms. Every instance counts the timeouts and recoveries it
// published (Published) into Redis; the leader declares a storm when more
// than storm.threshold of the tracked devices, and more than
// storm.min_devices, timed out within storm.window, or when a hold has
// lasted timeouts.min (a dead pipe, caught before it fired anything), and
// ends it once a whole window passed without that and without a hold. A
// hold that ends or expires names its storm itself, in the step that lets
// its deadlines fire (see shard's stall_end.lua and stall_expire.lua), so
// that each of them carries the storm_id.
type Namer struct {
	cfg  Config
	opts NamerOptions

	mu      sync.Mutex
	fired   map[int64]int     // unix ms of the second -> timeouts published
	tallies map[string][2]int // storm id -> timeouts, recoveries
	stormID string            // as this process last read it (no gate)

	tracked   int64
	trackedAt time.Time
}

// NewNamer returns a Namer.
func NewNamer(cfg Config, opts NamerOptions) *Namer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Namer{cfg: cfg, opts: opts, fired: make(map[int64]int), tallies: make(map[string][2]int)}
}

// StormID is the storm being named now, "" when none is.
func (n *Namer) StormID() string {
	if n.opts.Gate != nil {
		return n.opts.Gate.StormID()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stormID
}

// Published counts what dispatch published: timeouts (of storm stormID, ""
// for none) and recoveries.
func (n *Namer) Published(timeouts int, stormID string, recoveries int) {
	if timeouts == 0 && recoveries == 0 {
		return
	}
	if recoveries > 0 {
		stormID = n.StormID()
	}
	sec := n.opts.Now().UnixMilli() / 1000 * 1000
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fired[sec] += timeouts
	if stormID != "" {
		t := n.tallies[stormID]
		t[0] += timeouts
		t[1] += recoveries
		n.tallies[stormID] = t
	}
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
			n.flush(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
		}
		n.flush(ctx)
		if n.opts.Gate == nil || n.opts.Leader() {
			if err := n.step(ctx); err != nil && ctx.Err() == nil {
				n.opts.Log.Debug("storm naming", "err", err)
			}
		}
	}
}

// flush moves the counts to Redis; what fails is kept for the next tick.
func (n *Namer) flush(ctx context.Context) {
	n.mu.Lock()
	fired, tallies := n.fired, n.tallies
	n.fired, n.tallies = make(map[int64]int), make(map[string][2]int)
	n.mu.Unlock()
	for sec, c := range fired {
		if c == 0 {
			continue
		}
		if err := n.opts.Store.CountFired(ctx, sec, c); err != nil {
			n.mu.Lock()
			n.fired[sec] += c
			n.mu.Unlock()
		}
	}
	for id, t := range tallies {
		if err := n.opts.Store.CountStorm(ctx, id, t[0], t[1]); err != nil {
			n.mu.Lock()
			u := n.tallies[id]
			n.tallies[id] = [2]int{u[0] + t[0], u[1] + t[1]}
			n.mu.Unlock()
		}
	}
}

// Event is a storm_started or storm_ended event.
type Event struct {
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
	n.mu.Lock()
	n.stormID = ""
	if gs.Storm != nil {
		n.stormID = gs.Storm.ID
	}
	n.mu.Unlock()
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
			named, err := n.opts.Store.NameStorm(ctx, NewID(now), nowMs)
			if err != nil {
				return err
			}
			n.opts.Log.Warn("storm declared", "storm_id", named.ID, "timeouts_in_window", count, "tracked", n.tracked, "hold", hold)
		}
	case !st.Announced:
		v, _ := json.Marshal(Event{Type: "storm_started", StormID: st.ID, StartedAtMs: st.StartedMs, Devices: &count})
		if err := n.opts.Announcer.StormEvent(ctx, st.ID, v); err != nil {
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
		n.flush(ctx)
		timedOut, recovered, err := n.opts.Store.StormTally(ctx, st.ID)
		if err != nil {
			return err
		}
		v, _ := json.Marshal(Event{Type: "storm_ended", StormID: st.ID, StartedAtMs: st.StartedMs, EndedAtMs: nowMs, TimedOut: &timedOut, Recovered: &recovered})
		if err := n.opts.Announcer.StormEvent(ctx, st.ID, v); err != nil {
			return err
		}
		n.opts.Log.Info("storm ended", "storm_id", st.ID, "timed_out", timedOut, "recovered", recovered)
		return n.opts.Store.EndStorm(ctx, st.ID)
	}
	return nil
}
