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
	return d, nil
}
