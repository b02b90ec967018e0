package app

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
)

// readCluster reads the state that describes the deployment rather than
// this process (layout, shard sizes, due backlog, devices down, firing
// watermark) from Redis, for the collector that /metrics gathers
// (metrics.Options.Cluster). Every instance exports the same values, so
// they are right whichever instance Prometheus reaches and whatever roles
// it runs. Any failed read fails the whole: a total over the shards that
// answered would look like lost devices.
//
// Round trips: the layout; one pipeline of ZCARD and ZCOUNT per shard; the
// watermarks; one ZCOUNT per shard of the down sets; and, while at most
// inspect.DownByClassMax devices are down, one pipeline of down_count.lua
// per shard to split them by class (more when a shard holds more than
// shard.DownCountChunk of them); an HLEN per shard of the gateway holds
// (and the holds of the shards with some); while devices are down a SCAN
// of the gateways' orphans, whose children (at most
// inspect.DownByClassMax) are looked up in their shards; and while a
// maintenance window is open, two pipelines over the shards' held records.
func (a *App) readCluster(ctx context.Context) (metrics.Cluster, error) {
	l, _, err := a.Store.Layout(ctx)
	if err != nil {
		return metrics.Cluster{}, err
	}
	now := time.Now()
	n := l.Shards()
	c := metrics.Cluster{LayoutCount: l.Count, LayoutPrevious: l.Previous, Now: now}
	if c.Sizes, c.Due, err = a.Store.SizesAndDue(ctx, n, now.UnixMilli()); err != nil {
		return metrics.Cluster{}, err
	}
	gs, err := a.Store.ReadGate(ctx)
	if err != nil {
		return metrics.Cluster{}, err
	}
	if min, ok := shard.MinWatermark(gs.Watermarks, gs.Partitions); ok {
		c.WatermarkMs = min
	}
	c.Stalled = len(gs.Stalls)
	if gs.Hold != nil && !gs.Hold.Expired {
		c.HeldSinceMs = gs.Hold.SinceMs
	}
	down, err := inspect.CountDown(ctx, a.Store, a.policy, n, a.cfg.Dispatch.RecoveryWindow, inspect.DownByClassMax, now)
	if err != nil {
		return metrics.Cluster{}, err
	}
	held, err := a.Store.HeldCount(ctx, n)
	if err != nil {
		return metrics.Cluster{}, err
	}
	c.Held = map[string]int64{"gateway": held}
	c.Down = down.ByClass
	if c.Down == nil {
		c.Down = map[string]int64{metrics.DownAllClasses: down.Total}
	}
	if c.Held["maintenance"], err = a.maintenanceHeld(ctx, n); err != nil {
		return metrics.Cluster{}, err
	}
	if down.Total > 0 {
		c.Unreachable, err = a.unreachable(ctx, l, inspect.DownSince(a.cfg.Dispatch.RecoveryWindow, now))
		return c, err
	}
	c.Unreachable = map[string]int64{}
	return c, nil
}

// maintenanceHeld counts the devices the open maintenance windows hold: no
// read at all while none is open (as this instance last loaded them).
func (a *App) maintenanceHeld(ctx context.Context, n int) (int64, error) {
	if !a.maint.Active() {
		return 0, nil
	}
	counts, err := a.Store.HeldCounts(ctx, n)
	if err != nil {
		return 0, err
	}
	return a.maint.HeldOpen(counts), nil
}

// unreachable splits the devices down as unreachable by class name, nil
// when more than inspect.DownByClassMax children wait for their parents.
func (a *App) unreachable(ctx context.Context, l shard.Layout, sinceMs int64) (map[string]int64, error) {
	byID, ok, err := a.Store.UnreachableDown(ctx, l, sinceMs, inspect.DownByClassMax)
	if err != nil || !ok {
		return nil, err
	}
	out := make(map[string]int64)
	for id, n := range byID {
		name := ""
		if c, ok := a.policy.ByID(id); ok {
			name = c.Name
		}
		out[name] += n
	}
	return out, nil
}
