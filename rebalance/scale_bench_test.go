package rebalance_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
)

// BenchmarkScaleWith1MDevices measures `shards scale` with 1,000,000 devices
// tracked: it only writes the layout, so it must not depend on the number
// of devices (a doubling returns at once, no bulk copy). Each iteration doubles
// and, outside the timer, resets the layout.
func BenchmarkScaleWith1MDevices(b *testing.B) {
	store, _ := testenv.Store(b)
	ctx := context.Background()
	const devices, count = 1_000_000, 16
	var batch shard.Batch
	deadline := time.Now().Add(time.Hour).UnixMilli()
	for start := 0; start < devices; start += 10000 {
		batch.Reset(count)
		for i := start; i < start+10000; i++ {
			id := "dev-" + strconv.Itoa(i)
			batch.Add(shard.Of(shard.Hash(id), count), id, shard.Score(deadline, 0), 0)
		}
		if _, err := store.Write(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	tracked, _ := store.Tracked(ctx, count)
	if tracked != devices {
		b.Fatalf("tracked %d devices, want %d", tracked, devices)
	}
	l, err := rebalance.Ensure(ctx, store, count, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rebalance.Scale(ctx, store, 2*count, time.Now()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cur, _, _ := store.Layout(ctx)
		if l, err = store.SetLayout(ctx, cur.Epoch, shard.Layout{Count: count}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(tracked), "devices")
	_ = l
}
