package ingest

import (
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// The parent memory remembers what it was told, by whole device hashes,
// through its growth; a full bucket forgets one entry, never tells a
// parent it was not told.
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

	// Devices of one bucket past its ways: one is forgotten, the newcomer
	// and the others kept; no device reads another's parent.
	small := newParentMemo()
	dev := func(k uint64) uint64 { return k*minMemoBuckets + 1 } // all in bucket 1
	for k := range uint64(memoWays + 1) {
		small.put(dev(k), 100+k)
	}
	kept := 0
	for k := range uint64(memoWays + 1) {
		p, ok := small.parentOf(dev(k))
		if ok && p != 100+k {
			t.Errorf("device %d: parent %d; want %d", dev(k), p, 100+k)
		}
		if ok {
			kept++
		}
	}
	if p, ok := small.parentOf(dev(memoWays)); !ok || p != 100+memoWays || kept != memoWays {
		t.Errorf("the newcomer to a full bucket reads %d, %v, and %d of %d devices are kept; want it and %d",
			p, ok, kept, memoWays+1, memoWays)
	}
	if _, ok := small.parentOf(dev(memoWays + 1)); ok {
		t.Error("a device never put is remembered")
	}
}

// A fleet's children, hashed as routing hashes them, are nearly all still
// remembered when they beat again: hashes fill buckets unevenly, and the
// table grows before overfull buckets make a share of the fleet write its
// parents with every batch (a third of 200,000 children did, when four
// ways filled to three a bucket on average).
func TestParentMemoryKeepsAFleetItWasTold(t *testing.T) {
	for _, fleet := range []int{1_000, 200_000, 1_000_000} {
		pm := newParentMemo()
		hs := make([]uint64, fleet)
		for k := range hs {
			hs[k] = shard.Hash(fmt.Sprintf("dev-%d", k))
			pm.put(hs[k], shard.Hash(fmt.Sprintf("gw-%d", k/100)))
		}
		forgotten := 0
		for k, h := range hs {
			if p, ok := pm.parentOf(h); !ok || p != shard.Hash(fmt.Sprintf("gw-%d", k/100)) {
				forgotten++
				pm.put(h, shard.Hash(fmt.Sprintf("gw-%d", k/100)))
			}
		}
		if forgotten*200 > fleet {
			t.Errorf("a fleet of %d: %d children forgotten by their second beat, want at most 0.5 %%", fleet, forgotten)
		}
		t.Logf("a fleet of %d: %d forgotten, %d buckets", fleet, forgotten, len(pm.buckets))
	}
}

// Parent changes of two batches commute unless they give one device
// different parents: the same parent set twice, or other devices', may
// overlap in Redis; another parent, or none, for a device the batch ahead
// names may not.
func TestParentChangesConflictOnlyOverOneDevicesParent(t *testing.T) {
	set := map[uint64]uint64{1: 10, 2: 20}
	for _, c := range []struct {
		cs   []kinChange
		want bool
	}{
		{nil, false},
		{[]kinChange{{h: 1, ph: 10}, {h: 3, ph: 10}}, false},
		{[]kinChange{{h: 3, ph: 30}, {h: 2, ph: 21}}, true},
		{[]kinChange{{h: 1, ph: shard.Hash("")}}, true},
	} {
		if got := kinConflict(set, c.cs); got != c.want {
			t.Errorf("changes %v against %v: conflict %v, want %v", c.cs, set, got, c.want)
		}
	}
	if kinConflict(map[uint64]uint64{}, []kinChange{{h: 1, ph: 11}}) {
		t.Error("changes conflict with a batch that set no parent")
	}
}

// A batch prepared while the batches ahead of it are still being written
// compares its parents with what those batches set, not only with what is
// written: a device that moves to another gateway and back, or is
// deregistered and beats again naming its old gateway, across batches in
// flight, has its latest parent written. Once they are written, the
// memory alone answers, and a parent already there is not written again.
func TestParentChangesSeeTheBatchesAhead(t *testing.T) {
	pm := newParentMemo()
	d, a := shard.Hash("d"), shard.Hash("gw-a")
	hb := func(parent string) []entry { return []entry{{id: "d", h: d, hasParent: true, parent: parent}} }
	pm.written(pm.changes(hb("gw-a"), nil), nil, true) // written: d → gw-a
	if pm.active() != true || len(pm.pending) != 0 {
		t.Fatalf("after a written batch: active %v, %d pending; want true, 0", pm.active(), len(pm.pending))
	}

	first := pm.changes(hb("gw-b"), nil)  // d → gw-b, in flight
	second := pm.changes(hb("gw-a"), nil) // d → gw-a again, before the first is written
	if len(first) != 1 || len(second) != 1 || second[0].ph != a {
		t.Fatalf("changes %v then %v; want d → gw-b, then d → gw-a written again", first, second)
	}
	pm.written(first, nil, true)
	if again := pm.changes(hb("gw-a"), nil); len(again) != 0 {
		t.Fatalf("a third batch naming gw-a while the second is in flight: changes %v, want none", again)
	}
	pm.written(second, nil, true)
	pm.written(nil, nil, true) // the third batch, nothing set aside for d
	if p, ok := pm.parentOf(d); !ok || p != a || len(pm.pending) != 0 {
		t.Fatalf("written: parent %d, %v, %d pending; want gw-a's, none pending", p, ok, len(pm.pending))
	}
	if c := pm.changes(hb("gw-a"), nil); len(c) != 0 {
		t.Fatalf("nothing in flight, the parent remembered: changes %v, want none", c)
	}

	// A deregistration in flight: the device beating again names its
	// parent anew, though the memory still holds it.
	tomb := []entry{{id: "d", h: d, tomb: true}}
	pm.changes(tomb, nil)
	back := pm.changes(hb("gw-a"), nil)
	if len(back) != 1 || back[0].ph != a {
		t.Fatalf("after a deregistration in flight: changes %v, want d → gw-a", back)
	}
	pm.written(nil, tomb, true)
	pm.written(back, nil, true)
	if p, ok := pm.parentOf(d); !ok || p != a || len(pm.pending) != 0 {
		t.Fatalf("written: parent %d, %v, %d pending; want gw-a's, none pending", p, ok, len(pm.pending))
	}
}
