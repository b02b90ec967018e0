package ingest

import (
	"fmt"
	"testing"
)

// BenchmarkPrepare is ingest's own work per heartbeat (decode, the newest
// state per device, the parent memory, routing) over a fleet of 200,000
// devices in batches of 4,096, without a parent and with one in every
// heartbeat (a gateway per hundred devices, already written): what a
// parent costs the exact path beside Redis. In "parents" a gateway's
// children come one after another; in "parents-mixed" they are spread
// over the batches, as a partition keyed by device id holds them.
func BenchmarkPrepare(b *testing.B) {
	const fleet, batch = 200_000, 4096
	for _, bc := range []struct {
		name  string
		value func(ts int64, k int) string
	}{
		{"plain", func(ts int64, _ int) string { return fmt.Sprintf(`{"ts":%d}`, ts) }},
		{"parents", func(ts int64, k int) string { return fmt.Sprintf(`{"ts":%d,"parent":"gw-%06d"}`, ts, k/100) }},
		{"parents-mixed", func(ts int64, k int) string { return fmt.Sprintf(`{"ts":%d,"parent":"gw-%06d"}`, ts, k%(fleet/100)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pr := newPreparer(b)
			// The records' own time: one taken before the benchmarks before
			// this one would be past ingest.max_skew.
			ts := pr.now.UnixMilli()
			value := func(k int) string { return bc.value(ts, k) }
			var batches [][]chunk
			for first := 0; first < fleet; first += batch {
				batches = append(batches, pr.chunk(first, batch, value))
			}
			for _, c := range batches {
				pr.run(c) // the parents written once
			}
			b.ResetTimer()
			for k := 0; b.Loop(); k++ {
				pr.run(batches[k%len(batches)])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/heartbeat")
		})
	}
}
