package shard

// Layout is the shard layout rebalance owns and everyone routes by.
//
// Count is the number of shards devices are written to. While a doubling (or
// halving) is under way Previous is the count before it and devices may
// still sit in their shard under Previous; Previous is 0 otherwise.
type Layout struct {
	Count    int   `json:"count"`
	Previous int   `json:"previous"`
	Epoch    int64 `json:"epoch"`
	SinceMs  int64 `json:"since_ms"`
}

// Migrating reports whether members may still sit in their previous shard.
func (l Layout) Migrating() bool { return l.Previous != 0 && l.Previous != l.Count }

// ShardOf is the shard a device with routing hash h is written to.
func (l Layout) ShardOf(h uint64) int { return Of(h, l.Count) }

// PreviousOf is the shard a device with hash h had under the previous count,
// and whether that differs from its shard now.
func (l Layout) PreviousOf(h uint64) (int, bool) {
	if !l.Migrating() {
		return 0, false
	}
	p := Of(h, l.Previous)
	return p, p != Of(h, l.Count)
}

// Shards is the number of shard keys in use: the larger of both counts while
// migrating.
func (l Layout) Shards() int {
	if l.Migrating() && l.Previous > l.Count {
		return l.Previous
	}
	return l.Count
}
