package scanner

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

type layoutOf struct{ n int }

func (l layoutOf) Current() shard.Layout { return shard.Layout{Count: l.n} }

// Leases gained in one round fall due in one round, and are renewed a
// budget at a time instead (the oldest first), so no round renews more than
// its budget while none gets older than 3/8 of its TTL; the groups that
// makes stay apart, round after round. Rounds run on an injected clock.
func TestLeasesGainedTogetherRenewABudgetAtATime(t *testing.T) {
	t.Parallel()
	store, _ := testenv.Store(t)
	ctx := context.Background()
	const n = 1024
	clock := time.Now()
	l := NewLeaser(LeaserOptions{Store: store, Instance: "instance-1", TTL: 5 * time.Second, Layout: layoutOf{n},
		Apply: func([]int) error { return nil }, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return clock }})
	l.round(ctx)
	if got := len(l.Owned()); got != n {
		t.Fatalf("owned %d leases after the first round, want %d", got, n)
	}
	budget := l.renewBudget(n)
	if budget >= n {
		t.Fatalf("budget %d for %d leases: the test proves nothing", budget, n)
	}
	last := make(map[int]time.Time, n)
	for id, at := range l.renewed {
		last[id] = at
	}
	renewals := 0
	for range 5 * int(l.renewAfter()/l.tick) { // five renewals of each lease
		clock = clock.Add(l.tick)
		l.round(ctx)
		renewed := 0
		for id, at := range l.renewed {
			if at != last[id] {
				renewed++
				last[id] = at
			}
			if age := clock.Sub(at); age > l.ttl*3/8+l.tick {
				t.Fatalf("lease %d not renewed for %s, past 3/8 of its %s TTL", id, age, l.ttl)
			}
		}
		if renewed > budget {
			t.Fatalf("a round renewed %d leases, over its budget of %d", renewed, budget)
		}
		renewals += renewed
	}
	if got := len(l.Owned()); got != n {
		t.Fatalf("owned %d leases after the renewals, want %d: some were lost", got, n)
	}
	if renewals < 4*n {
		t.Fatalf("%d renewals of %d leases over five renewal periods", renewals, n)
	}
}
