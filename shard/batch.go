package shard

// Batch collects one ingest batch's writes, grouped by shard, so Store.Write
// sends them in one round trip. A Batch is reused across batches: Reset keeps
// its buffers.
type Batch struct {
	shards  []shardBatch
	touched []int
	// gateways are the parents the batch names already (SetParent): the
	// children of one gateway name it once in the SADD.
	gateways map[string]struct{}
}

type shardBatch struct {
	used bool
	// zadd is the shard's ZADD GT command: its first zaddHead slots are
	// filled by Store.Write, then score, member pairs.
	zadd []any
	n    int
	// scores and ids hold the pairs' values; zadd points into them, so no
	// value is boxed (an int64 or a string in an interface allocates).
	scores []int64
	ids    []string
	// moved lists, while the layout migrates, the pairs whose device had
	// another shard under the previous count (by AddMoved).
	moved []movedPair
	// hset is the HSET of the override timeouts: hsetHead slots, then
	// member, ms pairs.
	hset    []any
	forgets []any
	// reforgets are devices deregistered earlier in the batch and beating
	// again after: forgotten before the ZADD, not after it.
	reforgets []any
	// check is Store.Write's ZMSCORE of the members in the down set.
	check []any
	// parents, unparents and named are the parent changes of the batch
	// (SetParent): an HSET and an HDEL of the shard's parents, an SADD of
	// its gateways, each with a head of kinHead slots filled by Write.
	parents, unparents, named []any
}

const (
	zaddHead = 3 // ZADD key GT
	hsetHead = 2 // HSET key
)

// emptied is s cleared (no reference kept to what it held) and cut to
// length 0, its backing array kept.
func emptied[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// Reset empties b for shard count n, keeping its buffers.
func (b *Batch) Reset(n int) {
	for _, i := range b.touched {
		sb := &b.shards[i]
		sb.used = false
		sb.zadd, sb.n = emptied(sb.zadd), 0
		sb.scores, sb.ids = sb.scores[:0], emptied(sb.ids)
		sb.moved = sb.moved[:0]
		sb.hset, sb.forgets, sb.reforgets = emptied(sb.hset), emptied(sb.forgets), emptied(sb.reforgets)
		sb.check = emptied(sb.check)
		sb.parents, sb.unparents, sb.named = emptied(sb.parents), emptied(sb.unparents), emptied(sb.named)
	}
	b.touched = b.touched[:0]
	clear(b.gateways)
	if cap(b.shards) < n {
		b.shards = make([]shardBatch, n)
	}
	b.shards = b.shards[:n]
}

func (b *Batch) shard(i int) *shardBatch {
	sb := &b.shards[i]
	if !sb.used {
		sb.used = true
		b.touched = append(b.touched, i)
		sb.zadd = append(sb.zadd[:0], nil, nil, nil)
	}
	return sb
}

// Add records a heartbeat: device id's deadline in shard i becomes score,
// unless it already is later. overrideMs > 0 stores the device's own timeout.
func (b *Batch) Add(i int, id string, score float64, overrideMs int64) {
	sb := b.shard(i)
	// Scores are whole numbers (see Score): sent as integers, which go-redis
	// formats several times faster than floats, and Redis reads the same.
	// A pointer to an element stays right if the slice grows later: it
	// points into the old array, which holds the same value.
	sb.scores = append(sb.scores, int64(score))
	sb.ids = append(sb.ids, id)
	sb.zadd = append(sb.zadd, &sb.scores[sb.n], &sb.ids[sb.n])
	sb.n++
	if overrideMs > 0 {
		if len(sb.hset) == 0 {
			sb.hset = append(sb.hset, nil, nil)
		}
		sb.hset = append(sb.hset, id, overrideMs)
	}
}

// movedPair is a pair of a shard batch (its index k) whose device was in
// shard prev under the layout's previous count.
type movedPair struct {
	prev, k int
}

// AddMoved is Add for a device whose shard under the migrating layout's
// previous count, prev, is not i: if it timed out there, its down entry is
// in prev's down set, and Store.Write looks for it there too (a device back
// after its timeout, or a replay of it, mid-migration).
func (b *Batch) AddMoved(i, prev int, id string, score float64, overrideMs int64) {
	b.Add(i, id, score, overrideMs)
	sb := &b.shards[i]
	sb.moved = append(sb.moved, movedPair{prev: prev, k: sb.n - 1})
}

// Reregister is Add for a device deregistered earlier in the same batch: its
// old state (deadline, override, down entry) is removed before the new
// deadline is written, so the new one holds even when earlier than the old.
func (b *Batch) Reregister(i int, id string, score float64, overrideMs int64) {
	sb := b.shard(i)
	sb.reforgets = append(sb.reforgets, id)
	b.Add(i, id, score, overrideMs)
}

// Forget records a deregistration of device id in shard i.
func (b *Batch) Forget(i int, id string) {
	sb := b.shard(i)
	sb.forgets = append(sb.forgets, id)
}

// empty reports whether b holds no writes.
func (b *Batch) empty() bool { return len(b.touched) == 0 }
