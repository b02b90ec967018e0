package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// ErrMigrationInProgress refuses a scale while the previous one has not
// finalized.
var ErrMigrationInProgress = errors.New("a shard migration is still in progress")

// CheckScale says whether the layout can go from `from` to `to` shards:
// exactly double or half, a power of two within [1, 4096], nothing unfinished.
func CheckScale(from shard.Layout, to int) error {
	if from.Migrating() {
		return fmt.Errorf("%w (%d -> %d); wait until 'flatline shards status' shows it finalized", ErrMigrationInProgress, from.Previous, from.Count)
	}
	if !shard.ValidCount(to) {
		return fmt.Errorf("--to %d: the shard count must be a power of two within [1, %d]", to, shard.MaxShards)
	}
	if to != 2*from.Count && 2*to != from.Count {
		return fmt.Errorf("--to %d: the layout has %d shards; it can only double (--to %d) or halve (--to %d) without moving data", to, from.Count, 2*from.Count, from.Count/2)
	}
	return nil
}

// Scale starts a doubling or halving: it stores {count: to, previous:
// current} and returns at once; no member moves here. Instances pick the
// layout up within shards.poll_interval, the scanners apply the two-shard
// rule, and the sweeper moves what is left and finalizes.
func Scale(ctx context.Context, store *shard.Store, to int, now time.Time) (shard.Layout, error) {
	cur, ok, err := store.Layout(ctx)
	if err != nil {
		return shard.Layout{}, err
	}
	if !ok {
		return shard.Layout{}, errors.New("no layout stored yet: start 'flatline serve' once first")
	}
	if err := CheckScale(cur, to); err != nil {
		return shard.Layout{}, err
	}
	next, err := store.SetLayout(ctx, cur.Epoch, shard.Layout{Count: to, Previous: cur.Count, SinceMs: now.UnixMilli()})
	if errors.Is(err, shard.ErrLayoutChanged) {
		return shard.Layout{}, fmt.Errorf("the layout changed while scaling (another scale?): check 'flatline shards status' and retry")
	}
	return next, err
}
