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
// Memory is bounded and fixed: a table of slots, four to a 64-byte set,
// each one device's hash and its written deadline packed into two words,
// so a check costs one cache line — at 200,000 devices and more, each
// check is a cache miss, and two Go maps (a generation and the one before
// it) cost up to four. A device has two sets, chosen by two halves of its
// hash, and is looked for in the second only when the first lacks it; when
// both are full it takes the slot of the earliest deadline in them, the
// least likely to cover anything. A device not remembered is written,
// never skipped, so losing one costs a write, never a timeout. No
// generations are needed: a remembered deadline older than the window can
// cover nothing (see above).
type coalescer struct {
	mu     sync.Mutex // a generation's batcher checks, its writer records
	window int64      // ms
	slots  []slot     // sets of setWays; len a power of two
	sets   uint64     // len(slots) / setWays - 1: the set mask
	// overrides holds the override timeouts of remembered devices whose
	// meta says they have one (few devices have), at most len(slots): a
	// device given up by its slot may leave its entry until then.
	overrides map[uint64]int64
	keys      [][2]uint64 // filter's: the batch's hashes
	touched   uint64      // filter's: what its first pass read, kept so the reads stay
	// pending counts, per id hash, the prepared batches not yet written
	// whose tombstone (or re-registration) will undo what is remembered.
	pending map[uint64]int
}

// slot is one remembered write: the id's routing hash (0: empty) and the
// padded score as written (deadline and meta, 53 bits) with, above it,
// checkBits of a second, independent hash of the id, so that two ids
// colliding on the routing hash cannot share an entry.
type slot struct {
	key, val uint64
}

const (
	setWays   = 4
	scoreBits = 53
	scoreMask = 1<<scoreBits - 1
	checkBits = 64 - scoreBits
)

const coalesceMaxEntries = 1 << 20

func newCoalescer(windowMs int64, maxEntries int) *coalescer {
	n := setWays
	for n < maxEntries {
		n <<= 1
	}
	return &coalescer{window: windowMs, slots: make([]slot, n), sets: uint64(n/setWays - 1),
		overrides: make(map[uint64]int64), pending: make(map[uint64]int)}
}

// keyOf is the map key of routing hash h.
func keyOf(h uint64) uint64 { return max(h, 1) }

// checkOf is the FNV-1a check of id, checkBits wide.
func checkOf(id string) uint64 {
	check := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		check ^= uint32(id[i])
		check *= 16777619
	}
	return uint64(check) & (1<<checkBits - 1)
}

// sets2 returns the two sets of slots of hash h.
func (c *coalescer) sets2(h uint64) (a, b []slot) {
	i, j := (h&c.sets)*setWays, (h>>32&c.sets)*setWays
	return c.slots[i : i+setWays : i+setWays], c.slots[j : j+setWays : j+setWays]
}

// lookup returns the remembered padded score of (h, check), if any.
func (c *coalescer) lookup(h, check uint64) (float64, bool) {
	a, b := c.sets2(h)
	for _, set := range [2][]slot{a, b} {
		for _, sl := range set {
			if sl.key == h {
				return float64(sl.val & scoreMask), sl.val>>scoreBits == check
			}
		}
	}
	return 0, false
}

// filter drops from entries (padded scores) the heartbeats already covered,
// under one lock for the batch: the map lookups, each a likely cache miss,
// then overlap instead of waiting on a lock's memory barrier one by one.
// The entries' hashes (h, check) were taken when they were decoded, by the
// batches' decoding goroutines side by side, not here, one batch after the
// other. It returns the kept entries (in entries' array) and the
// heartbeats the dropped ones stood for.
func (c *coalescer) filter(entries []entry) ([]entry, int) {
	kept, skipped := entries[:0], 0
	c.mu.Lock()
	defer c.mu.Unlock()
	// The ids' hashes first, each touching its first set: the cache misses
	// of the whole batch then overlap, instead of one per check in turn.
	keys := c.keys[:0]
	var touched uint64
	for k := range entries {
		e := &entries[k]
		h := keyOf(e.h)
		keys = append(keys, [2]uint64{h, e.check})
		if e.tomb || e.reregister {
			c.pending[h]++
		}
		touched += c.slots[(h&c.sets)*setWays].key
	}
	c.keys, c.touched = keys, touched
	for k := range entries {
		e := entries[k]
		if !e.tomb && !e.reregister { // a reregistration replaces what is remembered
			d, meta := shard.DecodeScore(e.score)
			if c.coveredHashed(keys[k][0], keys[k][1], d-c.window, meta, e.override) {
				skipped += e.beats
				continue
			}
		}
		kept = append(kept, e)
	}
	clear(entries[len(kept):]) // the dropped ones' ids are not held on to
	return kept, skipped
}

func (c *coalescer) coveredHashed(h, check uint64, deadline int64, meta shard.Meta, override int64) bool {
	if len(c.pending) > 0 && c.pending[h] > 0 {
		return false
	}
	score, ok := c.lookup(h, check)
	if !ok {
		return false
	}
	d, m := shard.DecodeScore(score)
	if m != meta || deadline > d {
		return false
	}
	if m.Has(shard.FlagOverride) {
		return c.overrides[h] == override
	}
	return override == 0
}

// recordWritten remembers the writes of a batch Redis acknowledged, under
// one lock: its tombstones and re-registrations are undone first (see
// undone), then every heartbeat's padded deadline is recorded.
func (c *coalescer) recordWritten(entries []entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range entries {
		e := &entries[k]
		h := keyOf(e.h)
		if e.tomb || e.reregister {
			c.undoneLocked(h) // a re-registration's old, maybe later, deadline is gone
			if e.tomb {
				continue
			}
		}
		d, meta := shard.DecodeScore(e.score)
		c.recordLocked(h, e.check, d, meta, e.override)
	}
}

func (c *coalescer) recordLocked(h, check uint64, deadline int64, meta shard.Meta, override int64) {
	if len(c.pending) > 0 && c.pending[h] > 0 {
		return // a tombstone prepared after this write will undo it
	}
	if meta.Has(shard.FlagOverride) {
		if _, ok := c.overrides[h]; !ok && len(c.overrides) >= len(c.slots) {
			// Full of devices whose slots are gone, most likely: start
			// afresh (a device without an entry is just not covered).
			clear(c.overrides)
		}
		c.overrides[h] = override
	}
	val := check<<scoreBits | uint64(shard.Score(deadline, meta)) // deadlines after 2024 (see shard.Score)
	*c.victim(h) = slot{key: h, val: val}
}

// victim picks the slot that remembers h: its own, else an empty one of
// the set with more room (the first on a tie), else the one with the
// earliest deadline in its sets. Two choices keep the sets even: at a
// fifth of the table's capacity, a device finds both its sets full about
// never; at all of it, rarely.
func (c *coalescer) victim(h uint64) *slot {
	a, b := c.sets2(h)
	var earliest *slot
	var empty [2]*slot
	var room [2]int
	for s, set := range [2][]slot{a, b} {
		for k := range set {
			sl := &set[k]
			switch {
			case sl.key == h:
				return sl
			case sl.key == 0:
				if empty[s] == nil {
					empty[s] = sl
				}
				room[s]++
			case earliest == nil || sl.val&scoreMask < earliest.val&scoreMask:
				earliest = sl
			}
		}
	}
	switch {
	case room[0] > 0 && room[0] >= room[1]:
		return empty[0]
	case room[1] > 0:
		return empty[1]
	}
	return earliest
}

// forgetLocked drops device h (a tombstone).
func (c *coalescer) forgetLocked(h uint64) {
	a, b := c.sets2(h)
	for _, set := range [2][]slot{a, b} {
		for k := range set {
			if set[k].key == h {
				set[k] = slot{}
			}
		}
	}
	delete(c.overrides, h)
}

// undoneLocked forgets h once the batch whose tombstone (or
// re-registration) made it pending is written: it is pending one batch
// less.
func (c *coalescer) undoneLocked(h uint64) {
	c.forgetLocked(h)
	if c.pending[h] <= 1 {
		delete(c.pending, h)
	} else {
		c.pending[h]--
	}
}
