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
	st, w, log := sweepRig(t)
	// Forty devices time out under 16 shards.
	old := shard.Score(shard.Epoch+5000, 0)
	var b shard.Batch
	b.Reset(16)
	var ids []string
	for k := 0; k < 40; k++ {
		id := fmt.Sprintf("dev-%02d", k)
		ids = append(ids, id)
		b.Add(shard.Of(shard.Hash(id), 16), id, old, 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		i := shard.Of(shard.Hash(id), 16)
		if n, _, err := st.Fired(ctx, i, []shard.Member{{ID: id, Score: old}}, 0); err != nil || n != 1 {
			t.Fatalf("fire %s: %d, %v", id, n, err)
		}
	}
	if _, err := Scale(ctx, st, 32, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := w.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	l := w.Current()
	s := NewSweeper(SweeperOptions{Store: st, Watcher: w, Leader: func() bool { return true }, Log: log})
	if err := s.pass(ctx, l); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, id := range ids {
		h := shard.Hash(id)
		prev, home := shard.Of(h, 16), shard.Of(h, 32)
		if score, ok, _ := st.DownScore(ctx, home, id); !ok || score != old {
			t.Errorf("%s not down in its new shard %d: %v %v", id, home, score, ok)
		}
		if prev != home {
			moved++
			if _, ok, _ := st.DownScore(ctx, prev, id); ok {
				t.Errorf("%s still down in its old shard %d", id, prev)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no device changed shard: the test proves nothing")
	}
	if w.Current().Epoch != l.Epoch || !w.Current().Migrating() {
		t.Error("finalized by the pass that still moved down entries")
	}
}

// A sweep pass moves a device's parent with it, live or down: after the
// migration, a child's parent is found in the child's new shard and no
// longer in its old one.
func TestSweepMovesParents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, w, log := sweepRig(t)
	live := shard.Score(time.Now().Add(time.Hour).UnixMilli(), 0)
	down := shard.Score(shard.Epoch+5000, 0)
	var b shard.Batch
	b.Reset(16)
	var ids []string
	for k := 0; k < 40; k++ {
		id := fmt.Sprintf("child-%02d", k)
		ids = append(ids, id)
		i, score := shard.Of(shard.Hash(id), 16), live
		if k%2 == 1 {
			score = down
		}
		b.Add(i, id, score, 0)
		b.SetParent(i, id, "gw-"+id, shard.Of(shard.Hash("gw-"+id), 16))
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for k, id := range ids {
		if k%2 == 1 {
			if n, _, err := st.Fired(ctx, shard.Of(shard.Hash(id), 16), []shard.Member{{ID: id, Score: down}}, 0); err != nil || n != 1 {
				t.Fatalf("fire %s: %d, %v", id, n, err)
			}
		}
	}
	if _, err := Scale(ctx, st, 32, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := w.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	s := NewSweeper(SweeperOptions{Store: st, Watcher: w, Leader: func() bool { return true }, Log: log})
	if err := s.pass(ctx, w.Current()); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, id := range ids {
		h := shard.Hash(id)
		prev, home := shard.Of(h, 16), shard.Of(h, 32)
		if p, err := st.ParentOf(ctx, home, id); err != nil || p != "gw-"+id {
			t.Errorf("parent of %s in its new shard %d: %q, %v", id, home, p, err)
		}
		if prev != home {
			moved++
			if p, _ := st.ParentOf(ctx, prev, id); p != "" {
				t.Errorf("%s's parent still in its old shard %d", id, prev)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no device changed shard: the test proves nothing")
	}
}

// sweepRig is a store on a Redis of the test's own and a watcher on it,
// initialized with 16 shards.
func sweepRig(t *testing.T) (*shard.Store, *Watcher, *slog.Logger) {
	t.Helper()
	st, _ := testenv.Store(t)
	log := slog.New(slog.DiscardHandler)
	w := NewWatcher(WatcherOptions{Store: st, Config: DefaultConfig(), Log: log})
	if _, err := w.Init(context.Background(), 16); err != nil {
		t.Fatal(err)
	}
	return st, w, log
}
