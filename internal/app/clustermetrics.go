package app

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
)

// collectCluster refreshes the gauges that describe shared state rather than
// this process (layout, shard sizes, due backlog, firing watermark) from
// Redis, when /metrics is scraped. Every instance exports the same values, so
// they are right whichever instance Prometheus reaches and whatever roles it
// runs. Three round trips: the layout, one pipeline of ZCARD and ZCOUNT per
// shard, the watermarks. A failed read leaves the last values in place (the
// process gauges and /readyz tell the outage).
func (a *App) collectCluster(ctx context.Context) {
	l, ok, err := a.Store.Layout(ctx)
	if err != nil || !ok {
		return
	}
	now := time.Now()
	n := l.Shards()
	keys := a.Store.Keys()
	due := shard.MaxScore(now.UnixMilli())
	c := metrics.Cluster{LayoutCount: l.Count, LayoutPrevious: l.Previous, Now: now,
		Sizes: make([]int64, n), Due: make([]int64, n)}
	cmds, err := a.Store.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.ZCard(ctx, keys.Deadlines(i))
			p.ZCount(ctx, keys.Deadlines(i), "-inf", strconv.FormatFloat(due, 'f', -1, 64))
		}
		return nil
	})
	if err != nil {
		return
	}
	for i := 0; i < n; i++ {
		c.Sizes[i] = cmds[2*i].(*redis.IntCmd).Val()
		c.Due[i] = cmds[2*i+1].(*redis.IntCmd).Val()
	}
	if wms, parts, err := a.Store.Watermarks(ctx); err == nil && parts > 0 {
		min := int64(-1)
		for p := 0; p < parts; p++ {
			if v := wms[p]; min < 0 || v < min {
				min = v
			}
		}
		c.WatermarkMs = min
	}
	a.Metrics.SetCluster(c)
}
