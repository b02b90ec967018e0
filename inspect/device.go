package inspect

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// Device is what `flatline device get` shows.
type Device struct {
	DeviceID    string `json:"device_id"`
	Tracked     bool   `json:"tracked"`
	Shard       int    `json:"shard"`
	DeadlineMs  int64  `json:"deadline_ms,omitempty"`
	TimeoutMs   int64  `json:"timeout_ms,omitempty"`
	Class       string `json:"class,omitempty"`
	DownSinceMs int64  `json:"down_since_ms,omitempty"`
	// Parent is the device's gateway, when it has one (SPEC §14).
	Parent string `json:"parent,omitempty"`
	// State is tracked, held (its deadline passed while its parent was
	// silent: it waits for its parent), maintenance (a maintenance window
	// holds it; MaintenanceID names it), timed_out, unreachable (silent
	// while its parent was down) or untracked.
	State         string `json:"state"`
	MaintenanceID string `json:"maintenance_id,omitempty"`
}

// GetDevice looks a device up under the current layout (both shards while
// migrating: the later deadline counts).
func GetDevice(ctx context.Context, store *shard.Store, policy *timeouts.Policy, id string, pad time.Duration) (Device, error) {
	l, _, err := store.Layout(ctx)
	if err != nil {
		return Device{}, err
	}
	if l.Count == 0 {
		l.Count = 1
	}
	h := shard.Hash(id)
	d := Device{DeviceID: id, Shard: l.ShardOf(h)}
	candidates := []int{d.Shard}
	if prev, moved := l.PreviousOf(h); moved {
		candidates = append(candidates, prev)
	}
	var best float64
	bestShard := -1
	for _, i := range candidates {
		score, ok, err := store.Score(ctx, i, id)
		if err != nil {
			return Device{}, err
		}
		if ok && (bestShard < 0 || score > best) {
			best, bestShard = score, i
		}
	}
	if bestShard >= 0 {
		d.Tracked = true
		d.Shard = bestShard
		deadline, meta := shard.DecodeScore(best)
		if meta.Has(shard.FlagPadded) {
			deadline -= pad.Milliseconds()
		}
		d.DeadlineMs = deadline
		d.TimeoutMs = policy.Default().Milliseconds()
		if c, ok := policy.ByID(meta.ClassID()); ok {
			d.Class = c.Name
			d.TimeoutMs = c.Timeout.Milliseconds()
		}
		if meta.Has(shard.FlagOverride) {
			if o, err := store.Overrides(ctx, bestShard, []string{id}); err == nil {
				if ms, ok := o[id]; ok {
					d.TimeoutMs = ms
				}
			}
		}
	}
	if err := d.family(ctx, store, candidates); err != nil {
		return Device{}, err
	}
	for _, i := range candidates {
		down, ok, err := store.DownScore(ctx, i, id)
		if err != nil {
			return Device{}, err
		}
		if ok {
			ms, meta := shard.DecodeScore(down)
			if meta.Has(shard.FlagPadded) {
				ms -= pad.Milliseconds()
			}
			d.DownSinceMs = ms
		}
	}
	if err := d.state(ctx, store); err != nil {
		return Device{}, err
	}
	return d, d.maintenance(ctx, store, best, l.Count)
}

// family reads the device's parent, from the first of candidates (its
// shards) that has one.
func (d *Device) family(ctx context.Context, store *shard.Store, candidates []int) error {
	for _, i := range candidates {
		p, err := store.ParentOf(ctx, i, d.DeviceID)
		if err != nil {
			return err
		}
		if p != "" {
			d.Parent = p
			return nil
		}
	}
	return nil
}

// state sets d.State from what was read, reading whether a tracked device
// is held or a down one unreachable.
func (d *Device) state(ctx context.Context, store *shard.Store) error {
	switch {
	case d.Tracked:
		d.State = StateTracked
		held, err := store.Waiting(ctx, d.Shard, d.DeviceID)
		if err != nil {
			return err
		}
		if held {
			d.State = StateHeld
		}
	case d.DownSinceMs > 0:
		d.State = StateTimedOut
		if d.Parent != "" {
			orphan, err := store.IsOrphan(ctx, d.Parent, d.DeviceID)
			if err != nil {
				return err
			}
			if orphan {
				d.State = StateUnreachable
			}
		}
	default:
		d.State = StateUntracked
	}
	return nil
}

// maintenance tells a tracked device a maintenance window holds (parked at
// the window's end, and not heard since) from one merely tracked. The
// record is beside the device, or, after a doubling or a halving moved
// the device, in the shard it came from.
func (d *Device) maintenance(ctx context.Context, store *shard.Store, score float64, count int) error {
	if !d.Tracked {
		return nil
	}
	h := shard.Hash(d.DeviceID)
	for _, i := range []int{d.Shard, shard.Of(h, max(count/2, 1)), shard.Of(h, min(count*2, shard.MaxShards))} {
		recs, oks, err := store.HeldRecords(ctx, i, []string{d.DeviceID})
		if err != nil {
			return err
		}
		if oks[0] && recs[0].Stage == shard.HeldParked && recs[0].Score == score {
			d.State, d.MaintenanceID = StateMaintenance, recs[0].Window
			return nil
		}
	}
	return nil
}
