package ingest

import (
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// The parent memory remembers what it was told, by whole device hashes,
// through its growth; a full bucket forgets its oldest entry, never tells
// a parent it was not told.
func TestParentMemoryRemembersByWholeHash(t *testing.T) {
	pm := newParentMemo()
	if _, ok := pm.parentOf(shard.Hash("c-1")); ok {
		t.Fatal("an empty memory remembers a parent")
	}
	const n = 40_000 // past minMemoBuckets × 3: it grows
	for k := range uint64(n) {
		pm.put(k+1, 1000+k)
	}
	for k := range uint64(n) {
		if p, ok := pm.parentOf(k + 1); !ok || p != 1000+k {
			t.Fatalf("device %d: parent %d, %v; want %d", k+1, p, ok, 1000+k)
		}
	}
	if len(pm.buckets) <= minMemoBuckets || pm.n != n {
		t.Errorf("%d buckets, %d entries after %d puts: want it grown, %d", len(pm.buckets), pm.n, n, n)
	}
	pm.put(7, 5)
	if p, _ := pm.parentOf(7); p != 5 {
		t.Errorf("a changed parent reads %d, want 5", p)
	}
	pm.drop(7)
	if _, ok := pm.parentOf(7); ok || pm.n != n-1 {
		t.Errorf("a dropped device is remembered (%v) or counted (%d entries)", ok, pm.n)
	}

	// Devices of one bucket past its ways: the oldest is forgotten, the
	// others kept; no device reads another's parent.
	small := newParentMemo()
	dev := func(k uint64) uint64 { return k*minMemoBuckets + 1 } // all in bucket 1
	for k := range uint64(memoWays + 1) {
		small.put(dev(k), 100+k)
	}
	if _, ok := small.parentOf(dev(0)); ok {
		t.Error("the oldest of a full bucket is still remembered")
	}
	for k := uint64(1); k <= memoWays; k++ {
		if p, ok := small.parentOf(dev(k)); !ok || p != 100+k {
			t.Errorf("device %d: parent %d, %v; want %d", dev(k), p, ok, 100+k)
		}
	}
	if _, ok := small.parentOf(dev(memoWays + 1)); ok {
		t.Error("a device never put is remembered")
	}
}
