package ingest

import (
	"sync"

	"github.com/flatline-dev/flatline/shard"
)

// coalescer remembers, for ingest.coalesce_window, the deadlines this
// instance wrote, so a heartbeat already covered by one skips its Redis
// write.
//
// Why it is safe. A written deadline is padded by the window W:
// stored = t_w + timeout + W for a heartbeat at t_w. A later heartbeat at t
// (same timeout, class and override) skips its write only if
// t + timeout ≤ stored, i.e. t ≤ t_w + W. The device then fires at stored at
// the earliest, which is never before t + timeout (never early), and at most
// W after the last heartbeat's deadline, because t ≥ t_w (at most W late).
//
//   - Only writes Redis acknowledged are remembered (record runs after
//     Store.Write succeeded), so a skip never relies on a write that failed;
//     a batch prepared while the one before it is still being written just
//     does not see that one's writes yet (it writes more, never less).
//   - Other instances writing the same device cannot make it fire early:
//     writes are ZADD GT, so the stored deadline only grows.
//   - A consumer-group rebalance or a restart starts with an empty memory
//     (one coalescer per generation), so after partitions move nothing is
//     skipped on the strength of writes another owner may have undone
//     (a tombstone it processed, for example).
//   - A tombstone processed here forgets the device, and from the moment its
//     batch is prepared until it is written the device is pending: nothing
//     about it is covered, and a record of an earlier batch finishing
//     meanwhile is not kept — otherwise a heartbeat after the tombstone
//     could be skipped on the strength of a deadline the tombstone deletes.
//     A heartbeat re-registering a device after a tombstone of its own
//     batch is pending likewise.
//   - A layout change does not matter: a skipped write leaves the device in
//     the shard it was written to, which the two-shard rule of a migration
//     and its sweep handle like any other copy.
//
// Memory is bounded: two generations of at most maxEntries entries each,
// rotated every window (entries older than two windows can no longer cause
// a skip anyway); when the current one is full, new devices are simply not
// remembered.
type coalescer struct {
	mu         sync.Mutex // a generation's batcher checks, its writer records
	window     int64      // ms
	maxEntries int
	cur, prev  map[uint64]remembered
	rotatedAt  int64
	// pending counts, per id hash, the prepared batches not yet written
	// whose tombstone (or re-registration) will undo what is remembered.
	pending map[uint64]int
}

// remembered is one written deadline: the padded score's parts, the
// override timeout, and a second, independent hash of the id so that two
// ids colliding on the map key cannot share an entry.
type remembered struct {
	check    uint32
	meta     shard.Meta
	deadline int64
	override int64
}

const coalesceMaxEntries = 1 << 20

func newCoalescer(windowMs int64, maxEntries int) *coalescer {
	return &coalescer{window: windowMs, maxEntries: maxEntries, pending: make(map[uint64]int),
		cur: make(map[uint64]remembered), prev: make(map[uint64]remembered)}
}

// keysOf returns the map key (the routing hash) and an independent FNV-1a
// check of id.
func keysOf(id string) (uint64, uint32) {
	check := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		check ^= uint32(id[i])
		check *= 16777619
	}
	return shard.Hash(id), check
}

// rotate drops the older generation once per window.
func (c *coalescer) rotate(nowMs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if nowMs-c.rotatedAt < c.window {
		return
	}
	c.prev, c.cur = c.cur, c.prev
	clear(c.cur)
	c.rotatedAt = nowMs
}

// filter drops from entries (padded scores) the heartbeats already covered,
// under one lock for the batch: the map lookups, each a likely cache miss,
// then overlap instead of waiting on a lock's memory barrier one by one.
// It returns the kept entries (in entries' array) and the heartbeats the
// dropped ones stood for.
func (c *coalescer) filter(entries []entry) ([]entry, int) {
	kept, skipped := entries[:0], 0
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range entries {
		if e := &entries[k]; e.tomb || e.reregister {
			h, _ := keysOf(e.id)
			c.pending[h]++
		}
	}
	for k := range entries {
		e := entries[k]
		if !e.tomb && !e.reregister { // a reregistration replaces what is remembered
			d, meta := shard.DecodeScore(e.score)
			if c.coveredLocked(e.id, d-c.window, meta, e.override) {
				skipped += e.beats
				continue
			}
		}
		kept = append(kept, e)
	}
	clear(entries[len(kept):]) // the dropped ones' ids are not held on to
	return kept, skipped
}

func (c *coalescer) coveredLocked(id string, deadline int64, meta shard.Meta, override int64) bool {
	h, check := keysOf(id)
	if c.pending[h] > 0 {
		return false
	}
	r, ok := c.cur[h]
	if !ok {
		r, ok = c.prev[h]
	}
	return ok && r.check == check && r.meta == meta && r.override == override && deadline <= r.deadline
}

// record remembers a write Redis acknowledged (deadline padded).
func (c *coalescer) record(id string, deadline int64, meta shard.Meta, override int64) {
	h, check := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[h] > 0 {
		return // a tombstone prepared after this write will undo it
	}
	if _, ok := c.cur[h]; !ok && len(c.cur) >= c.maxEntries {
		return
	}
	c.cur[h] = remembered{check: check, meta: meta, deadline: deadline, override: override}
}

// forget drops a device (tombstone).
func (c *coalescer) forget(id string) {
	h, _ := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cur, h)
	delete(c.prev, h)
}

// undone is forget once the batch whose tombstone (or re-registration)
// made the device pending is written: the device is pending one batch less.
func (c *coalescer) undone(id string) {
	c.forget(id)
	h, _ := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[h] <= 1 {
		delete(c.pending, h)
	} else {
		c.pending[h]--
	}
}
