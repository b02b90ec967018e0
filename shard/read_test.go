package shard_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// DueWindows (by rank, in one round trip) returns what consecutive score
// reads with offsets return, ties in member order, the end included:
// with scores read, or first as one run of one score (oneScore), which
// falls back to reading them where the range holds several; it reports
// whether the range held one score.
func TestDueWindowsMatchConsecutiveReads(t *testing.T) {
	t.Parallel()
	for _, scores := range []int{5, 1} {
		st, ctx := storeWithTies(t, 70, scores)
		for _, oneScore := range []bool{false, true} {
			name := fmt.Sprintf("%d scores, oneScore %v", scores, oneScore)
			ws, one, err := st.DueWindows(ctx, 0, 3, 20, 21, 5, oneScore)
			if err != nil || len(ws) != 5 {
				t.Fatalf("%s: DueWindows = %d windows, %v", name, len(ws), err)
			}
			if one != (scores == 1) {
				t.Errorf("%s: one score reported %v", name, one)
			}
			for j, w := range ws {
				want, err := st.Due(ctx, 0, shard.MaxScore(shard.Epoch+1_000_000), 3+20*j, 21)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(w) != fmt.Sprint(want) {
					t.Errorf("%s: window %d = %v, want %v", name, j, w, want)
				}
			}
			if len(ws[3]) != 7 || len(ws[4]) != 0 {
				t.Errorf("%s: the last windows hold %d and %d members, want the 7 left and none", name, len(ws[3]), len(ws[4]))
			}
			if ws, _, err := st.DueWindows(ctx, 0, 70, 20, 21, 2, oneScore); err != nil || len(ws[0])+len(ws[1]) != 0 {
				t.Errorf("%s: past the end: %v, %v", name, ws, err)
			}
		}
	}
}

// storeWithTies returns a store whose shard 0 holds n devices d-00.. over
// only `scores` distinct scores, so reads cross ties.
func storeWithTies(t *testing.T, n, scores int) (*shard.Store, context.Context) {
	t.Helper()
	st, ctx := newStore(t)
	var b shard.Batch
	b.Reset(1)
	for k := 0; k < n; k++ {
		b.Add(0, fmt.Sprintf("d-%02d", k), shard.Score(shard.Epoch+int64(1000+k%scores), 0), 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	return st, ctx
}

// SizesAndDue counts a deadline at dueBy as due whatever its score's meta
// (class, flags), one a millisecond later as not, and a shard without a
// key as empty; its sizes are Sizes', their sum Tracked.
func TestSizesAndDueCutsAtTheDeadline(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
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
