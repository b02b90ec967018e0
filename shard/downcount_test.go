package shard_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// CountDownByClass reads the down sets a chunk per script call; members
// sharing a score (one deadline, one class) must be counted once whichever
// chunk boundary falls among them, and the window must cut by deadline
// whatever the flags. The expectation is counted in Go from the members
// themselves.
func TestCountDownByClassCountsEachEntryOnceAcrossChunks(t *testing.T) {
	t.Parallel()
	store, _ := testenv.Store(t)
	ctx := context.Background()
	const shards = 3
	const since = shard.Epoch + 1_000_000
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int]int64{}
	total := make([]int64, shards)
	for k := range 600 {
		i := k % shards
		// Few distinct deadlines, so that runs of equal scores straddle
		// every chunk size below; some before since.
		deadline := since + int64(rng.IntN(40)-10)*1000
		class := rng.IntN(4) * 300 // 0 (none), 300, 600, 900
		var flags shard.Meta
		if rng.IntN(3) == 0 {
			flags |= shard.FlagPadded
		}
		if rng.IntN(5) == 0 {
			flags |= shard.FlagOverride
		}
		score := shard.Score(deadline, shard.NewMeta(class, flags))
		if err := store.Client().ZAdd(ctx, store.Keys().Down(i), redis.Z{Score: score, Member: fmt.Sprintf("d%d", k)}).Err(); err != nil {
			t.Fatal(err)
		}
		if deadline >= since {
			want[class]++
			total[i]++
		}
	}
	for _, chunk := range []int{1, 2, 7, 50, 1000} {
		got, err := store.CountDownByClass(ctx, shards, since, chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if !maps.Equal(got.Counts, want) {
			t.Errorf("chunk %d: counts %v, want %v", chunk, got.Counts, want)
		}
		if chunk == 1000 && got.RoundTrips != 1 {
			t.Errorf("chunk %d: %d round trips, want 1 (every shard in one pipeline)", chunk, got.RoundTrips)
		}
		if chunk == 1 && got.RoundTrips < 10 {
			t.Errorf("chunk %d: %d round trips; the chunk does not bound a call", chunk, got.RoundTrips)
		}
	}
	per, err := store.DownSince(ctx, shards, since)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(per) != fmt.Sprint(total) {
		t.Errorf("DownSince = %v, want %v", per, total)
	}
	// Since 0: every entry.
	all, err := store.CountDownByClass(ctx, shards, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range all.Counts {
		n += c
	}
	if n != 600 {
		t.Errorf("since 0 counted %d, want all 600", n)
	}
}

// A shard whose down set does not exist counts nothing, without error.
func TestCountDownByClassOfNoDownSets(t *testing.T) {
	t.Parallel()
	store, _ := testenv.Store(t)
	got, err := store.CountDownByClass(context.Background(), 4, 0, 0)
	if err != nil || len(got.Counts) != 0 {
		t.Fatalf("got %v, %v; want no counts", got, err)
	}
}
