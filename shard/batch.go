package shard

// Batch collects one ingest batch's writes, grouped by shard, so Store.Write
// sends them in one round trip. A Batch is reused across batches: Reset keeps
// its buffers.
type Batch struct {
	shards  []shardBatch
	touched []int
}

type shardBatch struct {
	used      bool
	args      []any // args[0] is reserved for the pair count
	n         int
	overrides []any
	forgets   []any
}

// Reset empties b for shard count n, keeping its buffers.
func (b *Batch) Reset(n int) {
	for _, i := range b.touched {
		sb := &b.shards[i]
		sb.used = false
		clear(sb.args)
		sb.args, sb.n = sb.args[:0], 0
		clear(sb.overrides)
		sb.overrides = sb.overrides[:0]
		clear(sb.forgets)
		sb.forgets = sb.forgets[:0]
	}
	b.touched = b.touched[:0]
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
		sb.args = append(sb.args[:0], nil)
	}
	return sb
}

// Add records a heartbeat: device id's deadline in shard i becomes score,
// unless it already is later. overrideMs > 0 stores the device's own timeout.
func (b *Batch) Add(i int, id string, score float64, overrideMs int64) {
	sb := b.shard(i)
	sb.args = append(sb.args, score, id)
	sb.n++
	if overrideMs > 0 {
		sb.overrides = append(sb.overrides, id, overrideMs)
	}
}

// Forget records a deregistration of device id in shard i.
func (b *Batch) Forget(i int, id string) {
	sb := b.shard(i)
	sb.forgets = append(sb.forgets, id)
}

// Empty reports whether b holds no writes.
func (b *Batch) Empty() bool { return len(b.touched) == 0 }

// Shards returns the shards b touches.
func (b *Batch) Shards() []int { return b.touched }
