package ingest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// TestCoalescingNeverEarlyAtMostWindowLate simulates devices whose
// heartbeats arrive at random gaps (bursts, 1 Hz, long pauses, late ones)
// through coalescing ingest instances that get restarted and rebalanced at
// random, against a store that keeps the max of what was written (ZADD GT).
// After the last heartbeat, the device fires at its stored deadline: never
// before last heartbeat + timeout, and at most the window after it.
func TestCoalescingNeverEarlyAtMostWindowLate(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 22))
	const window, timeout = 10_000, 30_000 // ms
	meta := shard.NewMeta(3, shard.FlagPadded)
	var heartbeats, writes int
	for dev := 0; dev < 2000; dev++ {
		id := "dev-" + string(rune('a'+dev%26)) + string(rune('a'+dev/26%26)) + string(rune('a'+dev/676))
		// A table of 64 slots: one device each (2^20, the default,
		// would zero 16 MiB for each of the ~5,000 coalescers).
		owners := []*coalescer{newCoalescer(window, 64), newCoalescer(window, 64)}
		owner := 0
		var stored int64                // max padded deadline written to "Redis"
		now := int64(1_800_000_000_000) // ms, 2027: scores hold deadlines after 2024
		last := int64(0)
		for beat := 0; beat < 50; beat++ {
			switch k := r.IntN(10); {
			case k < 6:
				now += 1000 // 1 Hz
			case k < 8:
				now += r.Int64N(100) // burst
			default:
				now += r.Int64N(3 * window) // pause
			}
			at := now
			if r.IntN(10) == 0 {
				at -= r.Int64N(2000) // a late heartbeat (within max_skew territory)
			}
			switch r.IntN(40) {
			case 0: // restart or rebalance: the owner starts a new generation
				owners[owner] = newCoalescer(window, 64)
			case 1: // the partition moves to the other instance
				owner = 1 - owner
				owners[owner] = newCoalescer(window, 64)
			}
			c := owners[owner]
			heartbeats++
			deadline := at + timeout
			if at > last {
				last = at
			}
			if c.covered(id, deadline, meta, 0) {
				continue
			}
			writes++
			padded := deadline + window
			if padded > stored {
				stored = padded
			}
			c.record(id, padded, meta, 0)
		}
		if stored < last+timeout {
			t.Fatalf("%s fires at %d, before its last heartbeat %d + timeout", id, stored, last)
		}
		if stored > last+timeout+window {
			t.Fatalf("%s fires at %d, more than the window after %d + timeout", id, stored, last)
		}
	}
	t.Logf("%d heartbeats, %d writes (%.2f per heartbeat)", heartbeats, writes, float64(writes)/float64(heartbeats))
}

// At 1 Hz with a 10 s window, about one heartbeat in ten is written.
func TestCoalescingWriteRatio(t *testing.T) {
	t.Parallel()
	c := newCoalescer(10_000, 1024)
	meta := shard.NewMeta(0, shard.FlagPadded)
	var beats, writes int
	for sec := int64(0); sec < 600; sec++ {
		now := 1_800_000_000_000 + sec*1000
		for d := 0; d < 100; d++ {
			id := "d" + string(rune('A'+d))
			beats++
			if !c.covered(id, now+60_000, meta, 0) {
				writes++
				c.record(id, now+60_000+10_000, meta, 0)
			}
		}
	}
	ratio := float64(writes) / float64(beats)
	if ratio < 0.08 || ratio > 0.12 {
		t.Fatalf("writes per heartbeat %.3f, want about 0.1", ratio)
	}
	t.Logf("writes per heartbeat: %.3f", ratio)
}

func TestCoalescerBoundedAndForgets(t *testing.T) {
	t.Parallel()
	const t0 = 1_800_000_000_000 // ms, 2027: scores hold deadlines after 2024
	c := newCoalescer(1000, 100)
	for i := 0; i < 1000; i++ {
		c.record(fmt.Sprintf("dev-%d", i), t0+5000, 0, 0)
	}
	used := 0
	for _, sl := range c.slots {
		if sl.key != 0 {
			used++
		}
	}
	if len(c.slots) != 128 || used > 128 || used < 100 {
		t.Fatalf("%d of %d slots used after 1,000 devices with a cap of 100", used, len(c.slots))
	}
	f := newCoalescer(1000, 100)
	f.record("x", t0+5000, 0, 0)
	if !f.covered("x", t0+4000, 0, 0) || f.covered("x", t0+6000, 0, 0) || f.covered("y", t0+1, 0, 0) {
		t.Fatal("covered does not follow the recorded deadline")
	}
	f.forget("x")
	if f.covered("x", t0+1, 0, 0) {
		t.Fatal("a forgotten device is still covered")
	}
	// One set of four: a fifth device takes the slot of the earliest
	// deadline, and a device already remembered keeps its own slot.
	one := newCoalescer(1000, setWays)
	for id, d := range map[string]int64{"a": 5000, "b": 1000, "c": 6000, "d": 7000} {
		one.record(id, t0+d, 0, 0)
	}
	one.record("a", t0+5500, 0, 0)
	one.record("e", t0+8000, 0, 0)
	for id, d := range map[string]int64{"a": 5500, "c": 6000, "d": 7000, "e": 8000} {
		if !one.covered(id, t0+d, 0, 0) || one.covered(id, t0+d+1, 0, 0) {
			t.Errorf("%s not remembered at its deadline", id)
		}
	}
	if one.covered("b", t0, 0, 0) {
		t.Error("the earliest deadline was not the one given up")
	}
}

// An override timeout is part of what a write covers: the same deadline
// with another override is written.
func TestCoalescerOverride(t *testing.T) {
	t.Parallel()
	const t0 = 1_800_000_000_000
	c := newCoalescer(1000, 100)
	meta := shard.NewMeta(0, shard.FlagPadded|shard.FlagOverride)
	c.record("o", t0+5000, meta, 90_000)
	if !c.covered("o", t0+4000, meta, 90_000) {
		t.Fatal("not covered by its own write")
	}
	if c.covered("o", t0+4000, meta, 60_000) {
		t.Fatal("covered by a write of another override")
	}
	if c.covered("o", t0+4000, shard.NewMeta(0, shard.FlagPadded), 0) {
		t.Fatal("covered by a write with an override")
	}
}

// filter drops a batch's covered entries (padded scores), keeps the rest
// in order and counts the heartbeats the dropped ones stood for.
func TestCoalescerFilter(t *testing.T) {
	t.Parallel()
	const window = 1000
	const t0 = 1_800_000_000_000 // ms, 2027: scores hold deadlines after 2024
	c := newCoalescer(window, 100)
	meta := shard.NewMeta(0, shard.FlagPadded)
	c.record("covered", t0+5000+window, meta, 0)
	c.record("later", t0+5000+window, meta, 0)
	c.record("other-meta", t0+5000+window, meta, 0)
	c.record("tomb", t0+5000+window, meta, 0)
	padded := func(deadline int64, m shard.Meta) float64 { return shard.Score(deadline+window, m) }
	in := []entry{
		{id: "covered", score: padded(t0+4500, meta), beats: 3},
		{id: "later", score: padded(t0+6001, meta), beats: 1},
		{id: "other-meta", score: padded(t0+4000, shard.NewMeta(1, shard.FlagPadded)), beats: 1},
		{id: "tomb", tomb: true, beats: 2},
		{id: "new", score: padded(t0+100, meta), beats: 1},
	}
	kept, skipped := c.filter(hashed(in...))
	var ids []string
	for _, e := range kept {
		ids = append(ids, e.id)
	}
	if got, want := strings.Join(ids, ","), "later,other-meta,tomb,new"; got != want {
		t.Errorf("kept %s, want %s", got, want)
	}
	if skipped != 3 {
		t.Errorf("skipped %d heartbeats, want the covered entry's 3", skipped)
	}
}

// From the moment a batch with a device's tombstone is prepared until it is
// written, nothing about the device is covered, and an earlier batch's
// record finishing meanwhile is not kept: a heartbeat after the tombstone
// is never skipped on the strength of a deadline the tombstone deletes.
func TestCoalescerPendingTombstone(t *testing.T) {
	t.Parallel()
	const window = 1000
	const t0 = 1_800_000_000_000
	c := newCoalescer(window, 100)
	meta := shard.NewMeta(0, shard.FlagPadded)
	c.record("d", t0+90_000, meta, 0) // written long ago, a late deadline
	if kept, _ := c.filter(hashed(entry{id: "d", tomb: true, beats: 1})); len(kept) != 1 {
		t.Fatal("a tombstone was filtered")
	}
	c.record("d", t0+90_000, meta, 0) // an earlier batch finishing now
	hb := entry{id: "d", score: shard.Score(t0+5000+window, meta), beats: 1}
	if kept, skipped := c.filter(hashed(hb)); len(kept) != 1 || skipped != 0 {
		t.Fatal("a heartbeat after a pending tombstone was skipped as covered")
	}
	c.undone("d") // the tombstone's batch is written
	if kept, _ := c.filter(hashed(hb)); len(kept) != 1 {
		t.Fatal("covered by a deadline the tombstone deleted")
	}
	c.record("d", t0+5000+window, meta, 0)
	if kept, _ := c.filter(hashed(hb)); len(kept) != 0 {
		t.Fatal("not covered by its own write once nothing is pending")
	}
}

// covered (for the tests) reports whether a heartbeat needing deadline (unpadded) with meta
// and override is already covered by a remembered write.
func (c *coalescer) covered(id string, deadline int64, meta shard.Meta, override int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.coveredLocked(id, deadline, meta, override)
}

// keysOf returns the map key (the routing hash, never 0) and an independent
// FNV-1a check of id, checkBits wide.
func keysOf(id string) (uint64, uint64) {
	return keyOf(shard.Hash(id)), checkOf(id)
}

func (c *coalescer) coveredLocked(id string, deadline int64, meta shard.Meta, override int64) bool {
	h, check := keysOf(id)
	return c.coveredHashed(h, check, deadline, meta, override)
}

// record remembers a write Redis acknowledged (deadline padded).
func (c *coalescer) record(id string, deadline int64, meta shard.Meta, override int64) {
	h, check := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recordLocked(h, check, deadline, meta, override)
}

// forget drops a device (tombstone).
func (c *coalescer) forget(id string) {
	h, _ := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(h)
}

// undone is forget once the batch whose tombstone (or re-registration)
// made the device pending is written: the device is pending one batch less.
func (c *coalescer) undone(id string) {
	h, _ := keysOf(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.undoneLocked(h)
}

// hashed sets the hashes decoding sets on each entry (see processor.put).
func hashed(es ...entry) []entry {
	for k := range es {
		es[k].h, es[k].check = shard.Hash(es[k].id), checkOf(es[k].id)
	}
	return es
}
