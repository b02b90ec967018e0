package ingest

import (
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// BenchmarkCoalescerFilter: the coalescing check of a 4,096-heartbeat batch
// (Coalescer.filter, one lock) among 200,000 remembered devices; every
// heartbeat is covered.
func BenchmarkCoalescerFilter(b *testing.B) {
	const devices, batch, window = 200_000, 4096, 10_000
	const t0 = 1_800_000_000_000 // ms: scores hold deadlines after 2024
	meta := shard.NewMeta(0, shard.FlagPadded)
	c := newCoalescer(window, coalesceMaxEntries)
	ids := make([]string, devices)
	for k := range ids {
		ids[k] = fmt.Sprintf("dev-%08d", k)
		c.record(ids[k], t0+window, meta, 0)
	}
	template := make([]entry, batch)
	entries := make([]entry, batch)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		for k := range template {
			template[k] = hashed(entry{id: ids[((n*batch+k)*7919)%devices], score: shard.Score(t0+window-1000, meta), beats: 1})[0]
		}
		copy(entries, template)
		b.StartTimer()
		if kept, _ := c.filter(entries); len(kept) != 0 {
			b.Fatalf("%d heartbeats not covered", len(kept))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/heartbeat")
}
