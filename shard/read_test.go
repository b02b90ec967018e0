package shard_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// SizesAndDue counts a deadline at dueBy as due whatever its score's meta
// (class, flags), one a millisecond later as not, and a shard without a
// key as empty; its sizes are Sizes', their sum Tracked.
func TestSizesAndDueCutsAtTheDeadline(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := testenv.Context(t, 30*time.Second)
	const dueBy = shard.Epoch + 1_000_000
	var b shard.Batch
	b.Reset(4)
	b.Add(0, "early", shard.Score(dueBy-5000, 0), 0)
	b.Add(0, "at", shard.Score(dueBy, shard.NewMeta(shard.MaxClassID, shard.FlagOverride|shard.FlagPadded)), 1000)
	b.Add(0, "after", shard.Score(dueBy+1, 0), 0)
	b.Add(1, "later", shard.Score(dueBy+60_000, shard.NewMeta(3, 0)), 0)
	b.Add(2, "at-too", shard.Score(dueBy, 0), 0)
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	sizes, due, err := st.SizesAndDue(ctx, 4, dueBy)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 1, 1, 0}; !slices.Equal(sizes, want) {
		t.Errorf("sizes %v, want %v", sizes, want)
	}
	if want := []int64{2, 0, 1, 0}; !slices.Equal(due, want) {
		t.Errorf("due %v, want %v", due, want)
	}
	if alone, err := st.Sizes(ctx, 4); err != nil || !slices.Equal(alone, sizes) {
		t.Errorf("Sizes = %v, %v; want %v", alone, err, sizes)
	}
	if n, err := st.Tracked(ctx, 4); err != nil || n != 5 {
		t.Errorf("Tracked = %d, %v; want 5, the sizes' sum", n, err)
	}
	// Before the scores' epoch nothing can be due.
	if _, due, err := st.SizesAndDue(ctx, 4, shard.Epoch-1); err != nil || !slices.Equal(due, []int64{0, 0, 0, 0}) {
		t.Errorf("due before the epoch: %v, %v; want none", due, err)
	}
}
