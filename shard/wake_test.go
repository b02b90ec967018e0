package shard_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// A write announces the shards that got a deadline due within
// Wakes.Within, counted from after the write, and only those: a shard
// written a deadline beyond it, or only a deregistration, is not.
func TestWriteAnnouncesOnlySoonDeadlines(t *testing.T) {
	t.Parallel()
	plain, ctx := newStore(t)
	now := time.UnixMilli(shard.Epoch + 1_000_000_000)
	var announced [][]int
	st := shard.New(plain.Client(), shard.Options{Keys: plain.Keys(), Wakes: shard.Wakes{
		Within: time.Second, Now: func() time.Time { return now },
		Announce: func(shards []int) { announced = append(announced, slices.Clone(shards)) },
	}})
	var b shard.Batch
	b.Reset(4)
	b.Add(0, "later", shard.Score(now.Add(5*time.Second).UnixMilli(), 0), 0)
	b.Add(0, "soon", shard.Score(now.Add(999*time.Millisecond).UnixMilli(), shard.NewMeta(7, shard.FlagOverride)), 1000)
	b.Add(1, "just-beyond", shard.Score(now.Add(time.Second).UnixMilli(), 0), 0)
	b.Add(2, "overdue", shard.Score(now.Add(-time.Minute).UnixMilli(), 0), 0)
	b.Forget(3, "gone")
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if len(announced) != 1 || !slices.Equal(slices.Sorted(slices.Values(announced[0])), []int{0, 2}) {
		t.Fatalf("announced %v, want shards 0 and 2 once", announced)
	}
}

// Fronts reads every shard's earliest member in one round trip.
func TestFrontsAreEachShardsEarliest(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	now := time.Now().UnixMilli()
	var b shard.Batch
	b.Reset(3)
	b.Add(0, "b", shard.Score(now+2000, 0), 0)
	b.Add(0, "a", shard.Score(now+1000, 0), 0)
	b.Add(2, "c", shard.Score(now+3000, 0), 0)
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	fronts, ok, err := st.Fronts(ctx, []int{2, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	want := []shard.Member{{ID: "c", Score: shard.Score(now+3000, 0)}, {}, {ID: "a", Score: shard.Score(now+1000, 0)}}
	if !slices.Equal(fronts, want) || !slices.Equal(ok, []bool{true, false, true}) {
		t.Fatalf("fronts %v %v, want %v [true false true]", fronts, ok, want)
	}
}

// Published wake-ups reach a subscriber, which first hears that its
// subscription is confirmed.
func TestPublishedWakesReachSubscribers(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	sub := st.SubscribeWakes(ctx)
	defer func() {
		if err := sub.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, subscribed, ok := sub.Next(ctx); !ok || !subscribed {
		t.Fatalf("first message: subscribed %v ok %v, want the confirmation", subscribed, ok)
	}
	if err := st.PublishWakes(ctx, []int{3, 4095, 0}); err != nil {
		t.Fatal(err)
	}
	shards, subscribed, ok := sub.Next(ctx)
	if !ok || subscribed || !slices.Equal(shards, []int{3, 4095, 0}) {
		t.Fatalf("got %v (subscribed %v, ok %v), want [3 4095 0]", shards, subscribed, ok)
	}
}
