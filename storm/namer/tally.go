package namer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// TallyOptions wire a Tally.
type TallyOptions struct {
	Store *shard.Store
	// GateStormID is the storm being named as this process's firing gate
	// read it last (scanner.Gate.StormID); nil in a process without
	// scanners, where the Namer reads it instead.
	GateStormID func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Tally counts what this process's dispatch published, for the storm
// guard: timeouts per second (the surge the Namer looks for) and each
// storm's timeouts and recoveries (its storm_ended event). Dispatch counts
// into it (Published) and asks it which storm a timeout belongs to
// (StormID); the Namer moves the counts to Redis every tick, where every
// instance's add up.
type Tally struct {
	opts TallyOptions

	stormID atomic.Value // string: as the Namer last read it (no gate)

	mu      sync.Mutex
	fired   map[int64]int     // unix ms of the second -> timeouts published
	tallies map[string][2]int // storm id -> timeouts, recoveries
}

// NewTally returns an empty Tally.
func NewTally(opts TallyOptions) *Tally {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tally{opts: opts, fired: make(map[int64]int), tallies: make(map[string][2]int)}
}

// StormID is the storm being named now, "" when none is.
func (t *Tally) StormID() string {
	if t.opts.GateStormID != nil {
		return t.opts.GateStormID()
	}
	id, _ := t.stormID.Load().(string)
	return id
}

// sawStorm records the storm the Namer read (id, "" for none).
func (t *Tally) sawStorm(id string) { t.stormID.Store(id) }

// Published counts what dispatch published: timeouts (of storm stormID, ""
// for none) and recoveries.
func (t *Tally) Published(timeouts int, stormID string, recoveries int) {
	if timeouts == 0 && recoveries == 0 {
		return
	}
	if recoveries > 0 {
		stormID = t.StormID()
	}
	sec := t.opts.Now().UnixMilli() / 1000 * 1000
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fired[sec] += timeouts
	if stormID != "" {
		c := t.tallies[stormID]
		c[0] += timeouts
		c[1] += recoveries
		t.tallies[stormID] = c
	}
}

// flush moves the counts to Redis; what fails is kept for the next tick.
func (t *Tally) flush(ctx context.Context) {
	t.mu.Lock()
	fired, tallies := t.fired, t.tallies
	t.fired, t.tallies = make(map[int64]int), make(map[string][2]int)
	t.mu.Unlock()
	for sec, c := range fired {
		if c == 0 {
			continue
		}
		if err := t.opts.Store.CountFired(ctx, sec, c); err != nil {
			t.mu.Lock()
			t.fired[sec] += c
			t.mu.Unlock()
		}
	}
	for id, c := range tallies {
		if err := t.opts.Store.CountStorm(ctx, id, c[0], c[1]); err != nil {
			t.mu.Lock()
			u := t.tallies[id]
			t.tallies[id] = [2]int{u[0] + c[0], u[1] + c[1]}
			t.mu.Unlock()
		}
	}
}
