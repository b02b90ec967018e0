package inspect

import (
	"context"

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
	for i := 0; i < l.Shards(); i++ {
		var cursor uint64
		for {
			ms, next, err := store.ScanShard(ctx, i, cursor, 1000)
			if err != nil {
				return 0, 0, err
			}
			for _, m := range ms {
				total++
				if l.ShardOf(shard.Hash(m.ID)) != i {
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
