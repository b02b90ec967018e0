package app

import (
	"context"
	"flag"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// benchDown is how many devices BenchmarkScrapeWith1MTrackedAnd100kDown
// marks down: -args -bench-down 10000 measures a scrape that splits them by
// class (at most inspect.DownByClassMax).
var benchDown = flag.Int("bench-down", 100_000, "devices down in BenchmarkScrapeWith1MTrackedAnd100kDown")

// roundTrips counts the commands and pipelines a client sends: one round
// trip each.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// BenchmarkScrapeWith1MTrackedAnd100kDown measures what one scrape of
// /metrics costs with 1,000,000 devices tracked over 16 shards and 100,000
// of them down (five classes), written straight into Redis:
//
//	flock /tmp/flatline-heavy.lock go test -run '^$' -bench ScrapeWith1M -benchtime 50x ./app
//	(… ./app -args -bench-down 10000: with 10,000 down)
//
// gather is a whole scrape as Prometheus sees it (every collector);
// read is the Redis part of it (App.readCluster); split-by-class is what
// the read would cost if it split 100,000 down devices by class
// (inspect.CountDown with no limit), which it does only up to
// inspect.DownByClassMax. Each reports the round trips to Redis per op.
func BenchmarkScrapeWith1MTrackedAnd100kDown(b *testing.B) {
	const shards, tracked, classes = 16, 1_000_000, 5
	down := *benchDown
	store, _ := testenv.Store(b)
	ctx := context.Background()
	if _, err := store.SetLayout(ctx, 0, shard.Layout{Count: shards}); err != nil {
		b.Fatal(err)
	}
	names := make([]string, classes)
	for c := range names {
		names[c] = "class-" + strconv.Itoa(c)
	}
	ids, err := store.RegisterClasses(ctx, names)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	fill := func(n int, key func(int) string, score func(k int) float64) {
		const per = 1000 // members per ZADD
		for start := 0; start < n; start += 50 * per {
			_, err := store.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
				byKey := map[string][]redis.Z{}
				for k := start; k < min(n, start+50*per); k++ {
					id := "device-" + strconv.Itoa(k)
					i := shard.Of(shard.Hash(id), shards)
					byKey[key(i)] = append(byKey[key(i)], redis.Z{Member: id, Score: score(k)})
				}
				for key, zs := range byKey {
					p.ZAdd(ctx, key, zs...)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(tracked, store.Keys().Deadlines, func(k int) float64 {
		return shard.Score(now.Add(time.Hour).UnixMilli()+int64(k%60000), shard.NewMeta(ids[k%classes], 0))
	})
	// The down devices are other ids than the tracked ones.
	fill(down, store.Keys().Down, func(k int) float64 {
		return shard.Score(now.Add(-time.Hour).UnixMilli()+int64(k%60000), shard.NewMeta(ids[k%classes], 0))
	})
	wms := map[int]int64{}
	for p := range 8 {
		wms[p] = now.UnixMilli()
	}
	if err := store.RaiseWatermarks(ctx, 8, wms); err != nil {
		b.Fatal(err)
	}
	cfg := configs.Default()
	policy, err := ReadPolicy(ctx, store, cfg.Timeouts)
	if err != nil {
		b.Fatal(err)
	}
	a := &App{cfg: cfg, Store: store, policy: policy}
	// The collector's clock moves metrics.ClusterReuse at each look, so
	// that every gather reads Redis.
	clock := time.Now()
	a.Metrics = metrics.New(metrics.Options{Cluster: a.readCluster, Now: func() time.Time {
		clock = clock.Add(metrics.ClusterReuse)
		return clock
	}})
	rt := &roundTrips{}
	store.Client().(*redis.Client).AddHook(rt)

	c, err := a.readCluster(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for _, n := range c.Sizes {
		sum += n
	}
	var downs int64
	for _, n := range c.Down {
		downs += n
	}
	if sum != tracked || downs != int64(down) {
		b.Fatalf("read %d tracked and down %v; want %d and %d", sum, c.Down, tracked, down)
	}

	run := func(name string, op func() error) {
		b.Run(name, func(b *testing.B) {
			rt.n.Store(0)
			for b.Loop() {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
		})
	}
	run("gather", func() error {
		_, err := a.Metrics.Registry.Gather()
		return err
	})
	run("read", func() error {
		_, err := a.readCluster(ctx)
		return err
	})
	run("split-by-class", func() error {
		d, err := inspect.CountDown(ctx, store, policy, shards, cfg.Dispatch.RecoveryWindow, int64(down), time.Now())
		if err == nil && len(d.ByClass) != classes+1 {
			b.Fatalf("split %v", d.ByClass)
		}
		return err
	})
}
