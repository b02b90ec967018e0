package scanner

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
)

// LayoutSource gives the current layout.
type LayoutSource interface {
	Current() shard.Layout
}

// Leaser decides which shards this instance scans. Each shard's scanner runs
// under a Redis lease (SET NX PX, renewed by a compare-owner script), so at
// most one instance scans a shard at a time. Instances register every
// round (shard.Store.RegisterInstance); each takes free leases while below
// its share and gives extra ones up while above it, so shards spread evenly
// and a dead instance's shards are taken over once its leases expire. The share is shards/live,
// one more for the first shards%live instances by id, so counts differ by at
// most one and add up to the shard count.
type Leaser struct {
	store   *shard.Store
	id      string
	ttl     time.Duration
	tick    time.Duration
	layout  LayoutSource
	apply   func(ids []int) error
	drain   func(id int, d time.Duration)
	log     *slog.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	mu    sync.Mutex // guards owned for readers outside the leaser
	owned map[int]bool
	// renewed is when each owned lease was last acquired or renewed: a
	// lease not renewed for a whole TTL (Redis unreachable) is given up,
	// since another instance may hold it by now.
	renewed map[int]time.Time
	// reported is the shard count the per-shard ownership gauges were last
	// set for: they change only with ownership or the count.
	reported int
}

// renewAfter is how old a lease gets before a round renews it: about a
// quarter of its TTL (less half a tick, for a round that comes a little
// early), so most of the TTL remains to ride out failed renewals, each
// round trying again.
func (l *Leaser) renewAfter() time.Duration {
	return l.ttl/4 - l.tick/2
}

// renewBudget is how many due leases a round renews at most: twice the
// share of the owned leases that falls due per round, and at least one
// script's worth (shard.Store.RenewLeases). Leases gained together fall due
// together; renewed all at once, 4,096 of them took over 10 ms of Redis's
// time in one go at each renewal, and ingest's writes and watermark
// raises queued behind them: on a busy machine, the deadlines due around
// each renewal fired tens of milliseconds late. Renewed a budget at a time,
// the oldest due ones first, they part into groups a round apart, and stay
// so. Twice the share drains leases gained together within renewAfter/2,
// so no lease gets older than 3/8 of its TTL before its renewal.
func (l *Leaser) renewBudget(owned int) int {
	perRound := (owned*int(l.tick) + int(l.renewAfter()) - 1) / int(l.renewAfter())
	return max(2*perRound, minRenewBudget)
}

// minRenewBudget is a round's renewal budget however few leases are owned:
// what one call of lease_renew_many renews.
const minRenewBudget = 256

// maxLeaseTick is the longest time between two rounds.
const maxLeaseTick = 100 * time.Millisecond

// LeaserOptions wire a Leaser.
type LeaserOptions struct {
	Store *shard.Store
	// Instance is this instance's id: the leases' owner.
	Instance string
	// TTL is how long a lease lives without renewal (scanner.lease_ttl).
	TTL    time.Duration
	Layout LayoutSource
	// Apply makes this instance scan exactly the shards it owns
	// (Scanner.SetShards).
	Apply func(ids []int) error
	// Drain, when set, waits at most d for the batches in flight of shard
	// id, which the leaser stopped scanning, before it gives the lease up
	// for balance (Scanner.Drain).
	Drain   func(id int, d time.Duration)
	Metrics *metrics.Metrics // nil: no ownership gauges
	Log     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewLeaser returns a leaser; Run keeps the leases.
func NewLeaser(opts LeaserOptions) *Leaser {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Rounds come often enough for the renewals to spread over several
	// (see renewBudget), and for a free lease to be taken soon.
	tick := min(opts.TTL/4, maxLeaseTick)
	return &Leaser{store: opts.Store, id: opts.Instance, ttl: opts.TTL, tick: tick, layout: opts.Layout, apply: opts.Apply,
		drain: opts.Drain, log: opts.Log, metrics: opts.Metrics, now: opts.Now, owned: make(map[int]bool), renewed: make(map[int]time.Time)}
}

// Owned returns the shards this instance holds, sorted.
func (l *Leaser) Owned() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, 0, len(l.owned))
	for id := range l.owned {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

// Owns reports whether this instance holds shard id's lease.
func (l *Leaser) Owns(id int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owned[id]
}

// Run keeps the leases until ctx is cancelled, then releases them all.
func (l *Leaser) Run(ctx context.Context) error {
	t := time.NewTicker(l.tick)
	defer t.Stop()
	for {
		l.round(ctx)
		select {
		case <-ctx.Done():
			l.releaseAll()
			return nil
		case <-t.C:
		}
	}
}

// round is one turn of the leaser, in steps: learn this instance's share
// of the shards (target), renew the leases that are due (renew), give up
// those over the share (shed), take free ones up to it (acquire); then
// apply the ownership if it changed, and report it.
func (l *Leaser) round(ctx context.Context) {
	now := l.now()
	sh, ok := l.target(ctx, now)
	if !ok {
		return
	}
	lost := l.renew(ctx, now, sh.n)
	shed := l.shed(ctx, sh.target)
	gained := l.acquire(ctx, now, sh)
	changed := lost || shed || gained
	if changed {
		if err := l.apply(l.Owned()); err != nil {
			l.log.Error("apply shard ownership", "err", err)
		}
	}
	l.report(sh.n, changed)
}

// share is this instance's part of the shards in one round.
type share struct {
	n      int // the layout's shards
	peers  int // live instances
	rank   int // this instance's place among them, sorted by id
	target int // how many leases it holds
}

// target registers this instance and returns its share of the layout's
// shards: instances sorted by id share them, the first n%peers taking one
// more, so the counts differ by at most one and add up to n. ok is false
// when there are no shards or the registration failed; then the leases
// not renewed for a whole TTL are given up.
func (l *Leaser) target(ctx context.Context, now time.Time) (sh share, ok bool) {
	live, err := l.store.RegisterInstance(ctx, l.id, now.UnixMilli(), now.Add(-l.ttl).UnixMilli())
	if err != nil {
		if ctx.Err() == nil {
			l.log.Debug("instance registration failed", "err", err)
			l.expire(now)
		}
		return share{}, false
	}
	sh = share{n: l.layout.Current().Shards(), peers: max(len(live), 1)}
	if sh.n == 0 {
		return share{}, false
	}
	sort.Strings(live)
	for k, inst := range live {
		if inst == l.id {
			sh.rank = k
		}
	}
	sh.target = sh.n / sh.peers
	if sh.rank < sh.n%sh.peers {
		sh.target++
	}
	return sh, true
}

// renew renews the owned leases that are due, in one round trip, and
// drops those lost: another instance holds them, or the layout shrank
// below them. Each lease is renewed only once a renewal is due, so an
// instance's leases cost Redis little however many shards it scans; at
// most renewBudget at a time, the oldest first. It reports whether a lease
// was lost.
func (l *Leaser) renew(ctx context.Context, now time.Time, n int) bool {
	var renew, lost []int
	for id := range l.owned {
		switch {
		case id >= n:
			lost = append(lost, id)
		case now.Sub(l.renewed[id]) >= l.renewAfter():
			renew = append(renew, id)
		}
	}
	if budget := l.renewBudget(len(l.owned)); len(renew) > budget {
		slices.SortFunc(renew, func(a, b int) int { return l.renewed[a].Compare(l.renewed[b]) })
		// Past an outage, what is older than half its TTL goes at once.
		for budget < len(renew) && now.Sub(l.renewed[renew[budget]]) >= l.ttl/2 {
			budget++
		}
		renew = renew[:budget]
	}
	if renewed, err := l.store.RenewLeases(ctx, renew, l.id, l.ttl); err == nil {
		for k, id := range renew {
			if renewed[k] {
				l.renewed[id] = now
			} else {
				lost = append(lost, id)
			}
		}
	} // else Redis is unreachable: expire gives them up after a TTL
	for _, id := range lost {
		l.mu.Lock()
		delete(l.owned, id)
		l.mu.Unlock()
		l.log.Info("scanner lease lost", "shard", id)
	}
	return len(lost) > 0
}

// shed gives up the leases over target, highest shard first, so that a
// newcomer can take them. Each shard stops being scanned, and its batches
// in flight finish, before its lease is released: the next owner does not
// fire them again. It reports whether it released any.
func (l *Leaser) shed(ctx context.Context, target int) bool {
	released := false
	for len(l.owned) > target {
		ids := l.Owned()
		id := ids[len(ids)-1]
		l.mu.Lock()
		delete(l.owned, id)
		l.mu.Unlock()
		_ = l.apply(l.Owned())
		if l.drain != nil {
			l.drain(id, l.ttl/2)
		}
		if err := l.store.ReleaseLease(ctx, id, l.id); err != nil {
			break // it expires by itself
		}
		released = true
		l.log.Info("scanner lease released for balance", "shard", id)
	}
	return released
}

// acquire takes free leases until this instance holds its target, starting
// at a different shard per instance to spread the contention. It reports
// whether it gained any.
func (l *Leaser) acquire(ctx context.Context, now time.Time, sh share) bool {
	gained := false
	start := sh.rank * sh.n / sh.peers
	for k := 0; k < sh.n && len(l.owned) < sh.target; k++ {
		id := (start + k) % sh.n
		if l.owned[id] {
			continue
		}
		ok, err := l.store.AcquireLease(ctx, id, l.id, l.ttl)
		if err != nil {
			break
		}
		if ok {
			l.renewed[id] = now
			l.mu.Lock()
			l.owned[id] = true
			l.mu.Unlock()
			gained = true
			l.log.Info("scanner lease gained", "shard", id)
		}
	}
	return gained
}

// report sets the ownership gauges when the ownership or the shard count
// changed since they were last set.
func (l *Leaser) report(n int, changed bool) {
	if l.metrics == nil || (!changed && n == l.reported) {
		return
	}
	l.reported = n
	l.metrics.LeasesOwned.Set(float64(len(l.owned)))
	for id := 0; id < n; id++ {
		v := 0.0
		if l.owned[id] {
			v = 1
		}
		l.metrics.LeaseOwned.WithLabelValues(strconv.Itoa(id)).Set(v)
	}
}

// expire gives up the leases not renewed for a whole TTL.
func (l *Leaser) expire(now time.Time) {
	changed := false
	for _, id := range l.Owned() {
		if now.Sub(l.renewed[id]) >= l.ttl {
			l.mu.Lock()
			delete(l.owned, id)
			l.mu.Unlock()
			delete(l.renewed, id)
			changed = true
			l.log.Info("scanner lease expired: not renewed for a TTL", "shard", id)
		}
	}
	if changed {
		if err := l.apply(l.Owned()); err != nil {
			l.log.Error("apply shard ownership", "err", err)
		}
	}
}

func (l *Leaser) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.apply(nil)
	for id := range l.owned {
		_ = l.store.ReleaseLease(ctx, id, l.id)
		l.mu.Lock()
		delete(l.owned, id)
		l.mu.Unlock()
	}
	_ = l.store.DeregisterInstance(ctx, l.id)
	l.log.Info("scanner leases released")
}
