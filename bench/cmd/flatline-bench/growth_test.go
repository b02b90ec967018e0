package main

import (
	"slices"
	"testing"
	"time"
)

// The growth sweep's sizes, fleets and id layout; no test here measures
// speed.

func TestParseCounts(t *testing.T) {
	got, err := parseCounts(" 100000, 1_000_000,10000000 ,")
	if err != nil || !slices.Equal(got, []int{100_000, 1_000_000, 10_000_000}) {
		t.Fatalf("parseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "100000,x", "0", "-5", "1e6"} {
		if got, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) = %v, want an error", bad, got)
		}
	}
	if s := counts(growthReferenceSizes); s != "100000,1000000,10000000" {
		t.Errorf("counts(reference) = %q, which -growth-sizes' default must read back as", s)
	}
}

// A count list shorter than the sizes repeats its last count.
func TestCountAt(t *testing.T) {
	pairs := []int{3, 3, 1}
	for k, want := range []int{3, 3, 1, 1} {
		if got := countAt(pairs, k); got != want {
			t.Errorf("countAt(%v, %d) = %d, want %d", pairs, k, got, want)
		}
	}
	if got := countAt(nil, 2); got != 1 {
		t.Errorf("countAt(nil, 2) = %d, want 1", got)
	}
}

// Every size's ids have the largest size's width, so bytes per device
// compare like for like, and are distinct and in order.
func TestKeyspaceIDs(t *testing.T) {
	small, large := keyspaceIDs("g-", 1000, 10_000_000), keyspaceIDs("g-", 12, 12)
	if small[0] != "g-0000000" || small[999] != "g-0000999" {
		t.Fatalf("keyspaceIDs(1000 of 10M) = %q … %q, want g-0000000 … g-0000999", small[0], small[999])
	}
	if large[0] != "g-00" || large[11] != "g-11" {
		t.Fatalf("keyspaceIDs(12) = %q … %q, want g-00 … g-11", large[0], large[11])
	}
	if !slices.IsSorted(small) || len(slices.Compact(slices.Clone(small))) != len(small) {
		t.Fatal("keyspaceIDs are not distinct and in order")
	}
}

// The ingest fleet covers the whole keyspace, not its first part.
func TestSpread(t *testing.T) {
	at := spread(10_000_000, 200_000)
	if len(at) != 200_000 || at[0] != 0 || at[len(at)-1] != 9_999_950 {
		t.Fatalf("spread(10M, 200k): %d indexes, %d … %d", len(at), at[0], at[len(at)-1])
	}
	if !slices.IsSorted(at) || len(slices.Compact(slices.Clone(at))) != len(at) {
		t.Fatal("spread's indexes are not distinct and in order")
	}
	if all := spread(100_000, 200_000); len(all) != 100_000 || all[99_999] != 99_999 {
		t.Fatalf("spread(100k, 200k) = %d indexes, want every device once", len(all))
	}
}

// The lateness fleet of the reference size keeps its 40–100 s and 120 s;
// a larger one loaded at 100,000 devices/s still has its first deadline
// 40 s after the load.
func TestLatenessSlack(t *testing.T) {
	if s := latenessSlack(1_000_000); s != 0 {
		t.Errorf("latenessSlack(1M) = %s, want 0", s)
	}
	n := 10_000_000
	load := time.Duration(n) * 10 * time.Microsecond
	if first := 40*time.Second + latenessSlack(n); first-load < 40*time.Second-10*time.Second {
		t.Errorf("10M devices: first deadline %s after the start, the load ends at %s", first, load)
	}
}
