package rebalance

import (
	"context"
	"fmt"

	"github.com/flatline-dev/flatline/shard"
)

// CountMisplaced counts the members of a migrating layout that still sit in
// a shard they no longer route to, and the members of the shards that can
// hold such members. It walks the shards with ZSCAN, so it costs one pass
// over those shards.
func CountMisplaced(ctx context.Context, store *shard.Store, l shard.Layout) (misplaced, total int64, err error) {
	if !l.Migrating() {
		return 0, 0, nil
	}
	rdb := store.Client()
	for i := 0; i < l.Shards(); i++ {
		var cursor uint64
		for {
			vals, next, err := rdb.ZScan(ctx, store.Keys().Deadlines(i), cursor, "", 1000).Result()
			if err != nil {
				return 0, 0, fmt.Errorf("scan shard %d: %w", i, err)
			}
			for k := 0; k < len(vals); k += 2 {
				total++
				if l.ShardOf(shard.Hash(vals[k])) != i {
					misplaced++
				}
			}
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	return misplaced, total, nil
}
