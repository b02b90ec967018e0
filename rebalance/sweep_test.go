package rebalance

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// A pass of the sweep moves the down entries of devices whose shard changed
// into their new shard's down set (only if unchanged), and does not
// finalize while it still finds some: after the migration, a device that
// timed out in its old shard is found where ingest and the scanner look.
func TestSweepMovesDownEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSweepRig(t)
	// Forty devices time out under 16 shards.
	old := shard.Score(shard.Epoch+5000, 0)
	ids := r.write(t, "dev", false, func(int) (float64, bool) { return old, true })
	l := r.doubleAndPass(t)
	eachDoubled(t, ids, func(id string, prev, home int) {
		if score, ok, _ := r.st.DownScore(ctx, home, id); !ok || score != old {
			t.Errorf("%s not down in its new shard %d: %v %v", id, home, score, ok)
		}
		if prev == home {
			return
		}
		if _, ok, _ := r.st.DownScore(ctx, prev, id); ok {
			t.Errorf("%s still down in its old shard %d", id, prev)
		}
	})
	if r.w.Current().Epoch != l.Epoch || !r.w.Current().Migrating() {
		t.Error("finalized by the pass that still moved down entries")
	}
}

// A sweep pass moves a device's parent with it, live or down: after the
// migration, a child's parent is found in the child's new shard and no
// longer in its old one.
func TestSweepMovesParents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSweepRig(t)
	live := shard.Score(time.Now().Add(time.Hour).UnixMilli(), 0)
	down := shard.Score(shard.Epoch+5000, 0)
	ids := r.write(t, "child", true, func(k int) (float64, bool) {
		if k%2 == 1 {
			return down, true
		}
		return live, false
	})
	r.doubleAndPass(t)
	eachDoubled(t, ids, func(id string, prev, home int) {
		if p, err := r.st.ParentOf(ctx, home, id); err != nil || p != "gw-"+id {
			t.Errorf("parent of %s in its new shard %d: %q, %v", id, home, p, err)
		}
		if prev == home {
			return
		}
		if p, _ := r.st.ParentOf(ctx, prev, id); p != "" {
			t.Errorf("%s's parent still in its old shard %d", id, prev)
		}
	})
}

// sweepRig is a store on a Redis of the test's own and a watcher on it,
// initialized with 16 shards.
type sweepRig struct {
	st  *shard.Store
	w   *Watcher
	log *slog.Logger
}

func newSweepRig(t *testing.T) *sweepRig {
	t.Helper()
	st, _ := testenv.Store(t)
	log := slog.New(slog.DiscardHandler)
	w := NewWatcher(WatcherOptions{Store: st, Config: DefaultConfig(), Log: log})
	if _, err := w.Init(context.Background(), 16); err != nil {
		t.Fatal(err)
	}
	return &sweepRig{st: st, w: w, log: log}
}

// write writes forty devices, prefix-00 to prefix-39, under 16 shards,
// device k with the score state(k) gives, then fires (times out) those it
// says are down. With parents, device id's parent is "gw-"+id. It returns
// the ids.
func (r *sweepRig) write(t *testing.T, prefix string, parents bool, state func(k int) (score float64, down bool)) []string {
	t.Helper()
	ctx := context.Background()
	var b shard.Batch
	b.Reset(16)
	ids := make([]string, 40)
	for k := range ids {
		id := fmt.Sprintf("%s-%02d", prefix, k)
		ids[k] = id
		score, _ := state(k)
		i := shard.Of(shard.Hash(id), 16)
		b.Add(i, id, score, 0)
		if parents {
			b.SetParent(i, id, "gw-"+id, shard.Of(shard.Hash("gw-"+id), 16))
		}
	}
	if _, err := r.st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for k, id := range ids {
		if score, down := state(k); down {
			if n, _, err := r.st.Fired(ctx, shard.Of(shard.Hash(id), 16), []shard.Member{{ID: id, Score: score}}, 0); err != nil || n != 1 {
				t.Fatalf("fire %s: %d, %v", id, n, err)
			}
		}
	}
	return ids
}

// doubleAndPass scales to 32 shards, lets the watcher see the migration and
// runs one pass of the sweep under it. It returns the layout of the pass.
func (r *sweepRig) doubleAndPass(t *testing.T) shard.Layout {
	t.Helper()
	ctx := context.Background()
	if _, err := Scale(ctx, r.st, 32, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r.w.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	l := r.w.Current()
	s := NewSweeper(SweeperOptions{Store: r.st, Watcher: r.w, Leader: func() bool { return true }, Log: r.log})
	if err := s.pass(ctx, l); err != nil {
		t.Fatal(err)
	}
	return l
}

// eachDoubled calls check with every id's shard under 16 shards and under
// 32, and fails the test when no device changed shard: it would prove
// nothing.
func eachDoubled(t *testing.T, ids []string, check func(id string, prev, home int)) {
	t.Helper()
	moved := 0
	for _, id := range ids {
		h := shard.Hash(id)
		prev, home := shard.Of(h, 16), shard.Of(h, 32)
		if prev != home {
			moved++
		}
		check(id, prev, home)
	}
	if moved == 0 {
		t.Fatal("no device changed shard: the test proves nothing")
	}
}
