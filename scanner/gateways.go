package scanner

import (
	"context"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// GatewaysConfig is the gateways section of the configuration (SPEC §14).
type GatewaysConfig struct {
	// MaxHold bounds how long a child whose deadline passed while its
	// parent was silent waits for its parent, from its deadline: then it
	// fires a timeout. 0 turns holding off (a child of a parent already
	// down is still reported unreachable). Default: 10m.
	MaxHold time.Duration `config:"max_hold"`
}

// DefaultGatewaysConfig returns the documented defaults.
func DefaultGatewaysConfig() GatewaysConfig { return GatewaysConfig{MaxHold: 10 * time.Minute} }

// Validate checks the section; errors name the offending key.
func (c GatewaysConfig) Validate() error {
	return confcheck.Within("gateways.max_hold", c.MaxHold, 0, 24*time.Hour)
}

// recheckSlack is how long after its parent's deadline a held child looks
// again: time for the parent's own timeout to be published first. A
// parent due and not yet timed out (its scanner's lease moving on, its
// group in flight) is looked at again after half its lateness, at most
// recheckMax.
const (
	recheckSlack = 250 * time.Millisecond
	recheckMax   = time.Second
)

// kinlessFor is how long a family key of a shard (its parents, gateways
// or holds) found absent is taken to stay so: a parent named meanwhile
// counts for deadlines after that. (A child's deadline is at least
// timeouts.min, 1 s by default, after the heartbeat that named its
// parent.)
const kinlessFor = time.Second

// absentKin remembers which of a shard's family keys were found absent,
// and until when, so that a group reads only the keys there are: a fleet
// without parents pays a round trip a second per shard with due devices,
// and a shard whose devices name no gateway and hold no child reads only
// its parents. Holds are written by the shard's own scanner alone
// (Rescore): an absence read while one of its hold writes was under way,
// or began, is not remembered. While the layout migrates, or once it
// changed, every key is read.
type absentKin struct {
	mu                 sync.Mutex
	epoch              int64 // the layout's the absences were found under
	parents, gateways  int64 // absent until (Unix ms)
	holds              int64
	holdWrites, holdsN int // hold writes under way, and begun
}

// kinTicket is what a read of the keys knew when it began.
type kinTicket struct {
	since, epoch int64
	migrating    bool
	busy         bool // a hold write was under way
	holdsN       int
}

// toRead returns the keys a group due at nowMs under l reads.
func (a *absentKin) toRead(l shard.Layout, nowMs int64) (shard.KinKeys, kinTicket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := kinTicket{since: nowMs, epoch: l.Epoch, migrating: l.Migrating(), busy: a.holdWrites > 0, holdsN: a.holdsN}
	if t.migrating || l.Epoch != a.epoch {
		return shard.KinKeys{Parents: true, Gateways: true, Holds: true}, t
	}
	return shard.KinKeys{Parents: nowMs >= a.parents, Gateways: nowMs >= a.gateways, Holds: nowMs >= a.holds}, t
}

// found remembers the keys the read of t found absent.
func (a *absentKin) found(exist shard.KinKeys, t kinTicket) {
	if t.migrating {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.epoch != t.epoch {
		a.epoch, a.parents, a.gateways, a.holds = t.epoch, 0, 0, 0
	}
	until := t.since + kinlessFor.Milliseconds()
	if !exist.Parents {
		a.parents = until
	}
	if !exist.Gateways {
		a.gateways = until
	}
	if !exist.Holds && !t.busy && a.holdsN == t.holdsN {
		a.holds = until
	}
}

// writingHolds is called before the scanner writes holds, done after.
func (a *absentKin) writingHolds() (done func()) {
	a.mu.Lock()
	a.holdWrites++
	a.holdsN++
	a.holds = 0
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.holdWrites--
		a.mu.Unlock()
	}
}

// gateways is firing's step for families (SPEC §14): a child due while its
// parent is silent waits for its parent instead of firing. Of batch it
// returns the members that fire now, each at the score to fire at, and
// what their events say of their family (nil when none has any: a fleet
// without parents pays a round trip a second per shard with due devices
// for finding that out, see kinlessFor).
//
// At a child's deadline D (timeout T), its parent not heard since D − T/2
// holds it: it is given its parent's deadline (+ recheckSlack) as its own,
// remembering D (shard.Wait), and its parent is marked awaited. The
// parent's first heartbeat R after that gives the child its own timeout
// from R (ingest, shard.Store.ReturnOrphans). Else the child is looked at
// again at that deadline: the parent beat again (the child gets its own
// timeout from the parent's latest heartbeat), or it timed out (the child
// is published as unreachable, with D's event id), or neither yet (it
// waits on, at most gateways.max_hold from D). Each
// score change is conditional on the score read, so a child that beats
// meanwhile just goes on. The parent is read with its own commands: it may
// live on another Redis Cluster node than its child.
func (sc *shardScanner) gateways(ctx context.Context, batch []shard.Member, overrides map[string]int64) ([]shard.Member, map[string]timeouts.Note, error) {
	s := sc.s
	if s.opts.Gateways == nil || s.opts.Timing == nil || len(batch) == 0 {
		return batch, nil, nil
	}
	l := s.opts.Layout.Current()
	read, t := sc.kin.toRead(l, s.opts.Now().UnixMilli())
	if read == (shard.KinKeys{}) {
		return batch, nil, nil
	}
	// How far firing may go, before any parent is read: a parent's
	// heartbeat the watermark covers is in Redis by then (silentPast).
	upTo := s.opts.Gate.upTo(s.opts.Now())
	// The children of a gateway come due together, group after group:
	// the last group's parents are read beside this one's kin.
	var guess []string
	if g := sc.parents.Load(); g != nil {
		guess = *g
	}
	kin, any, exist, guessed, err := s.opts.Store.KinOf(ctx, sc.id, batch, otherShards(l, sc.id, batch), read, parentReads(l, guess))
	if err == nil {
		sc.kin.found(exist, t)
	}
	if err == nil && !any && guess != nil {
		sc.parents.Store(nil) // no children due here now
	}
	if err != nil || !any {
		return batch, nil, err
	}
	f := &family{sc: sc, batch: batch, kin: kin, overrides: overrides, now: s.opts.Now().UnixMilli(),
		upTo: upTo, maxHold: s.opts.Gateways.MaxHold.Milliseconds(),
		acts: make([]act, len(batch)), l: l}
	if err := f.readParents(ctx, l, guess, guessed); err != nil {
		return nil, nil, err
	}
	for k := range batch {
		f.decide(k)
	}
	return f.apply(ctx)
}

// parentReads are the reads of parents ids under l: each in its shard
// and, while l migrates, its other one.
func parentReads(l shard.Layout, ids []string) shard.ParentReads {
	r := shard.ParentReads{IDs: ids}
	if len(ids) > 0 {
		r.Shards = make([][]int, len(ids))
	}
	for k, id := range ids {
		h := shard.Hash(id)
		r.Shards[k] = []int{l.ShardOf(h)}
		if prev, moved := l.PreviousOf(h); moved {
			r.Shards[k] = append(r.Shards[k], prev)
		}
	}
	return r
}

// otherShards are, while l migrates, the other shard of each member of
// batch (of shard id), where its family entries may still be; else nil.
func otherShards(l shard.Layout, id int, batch []shard.Member) []int {
	if !l.Migrating() {
		return nil
	}
	out := make([]int, len(batch))
	for k, m := range batch {
		h := shard.Hash(m.ID)
		out[k] = l.ShardOf(h)
		if out[k] == id {
			out[k] = shard.Of(h, l.Previous)
		}
	}
	return out
}

// publish publishes the group's events: noted when some member's event
// says more than a plain timeout, else as plain timeouts.
func (sc *shardScanner) publish(ctx context.Context, fire []shard.Member, overrides map[string]int64, notes map[string]timeouts.Note, detectedAt time.Time) error {
	if len(notes) == 0 {
		return sc.s.opts.Dispatcher.Timeouts(ctx, sc.id, fire, overrides, detectedAt)
	}
	return sc.s.opts.Dispatcher.Noted(ctx, sc.id, fire, overrides, notes, detectedAt)
}

// downMemory is how long fired devices are remembered as down (as remove
// prunes them): a parent's return is told by its down entry only as long.
func (s *Scanner) downMemory() time.Duration {
	minDown := s.opts.MinDownMemory
	if minDown == 0 {
		minDown = defaultMinDownMemory
	}
	return max(s.opts.RecoveryWindow, minDown)
}
