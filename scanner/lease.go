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

func (l *Leaser) round(ctx context.Context) {
	now := l.now()
	live, err := l.store.RegisterInstance(ctx, l.id, now.UnixMilli(), now.Add(-l.ttl).UnixMilli())
	if err != nil {
		if ctx.Err() == nil {
			l.log.Debug("instance registration failed", "err", err)
			l.expire(now)
		}
		return
	}
	n := l.layout.Current().Shards()
	if n == 0 {
		return
	}
	sort.Strings(live)
	peers := len(live)
	if peers == 0 {
		peers = 1
	}
	// Instances sorted by id share the shards: the first n%peers take one
	// more, so the counts differ by at most one and add up to n.
	rank := 0
	for k, inst := range live {
		if inst == l.id {
			rank = k
		}
	}
	target := n / peers
	if rank < n%peers {
		target++
	}
	changed := false
	// Renewed in one round trip, and each lease only once a renewal is
	// due, so an instance's leases cost Redis little however many
	// shards it scans; at most renewBudget at a time, the oldest first.
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
		changed = true
		l.log.Info("scanner lease lost", "shard", id)
	}
	// Give extra shards up (highest first) so a newcomer can take them.
	for len(l.owned) > target {
		ids := l.Owned()
		id := ids[len(ids)-1]
		// Stop scanning it and let its batches finish first, so the next
		// owner does not fire them again.
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
		changed = true
		l.log.Info("scanner lease released for balance", "shard", id)
	}
	if len(l.owned) < target {
		// Start at a different shard per instance to spread contention.
		start := rank * n / peers
		for k := 0; k < n && len(l.owned) < target; k++ {
			id := (start + k) % n
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
				changed = true
				l.log.Info("scanner lease gained", "shard", id)
			}
		}
	}
	if changed {
		if err := l.apply(l.Owned()); err != nil {
			l.log.Error("apply shard ownership", "err", err)
		}
	}
	if l.metrics != nil && (changed || n != l.reported) {
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
