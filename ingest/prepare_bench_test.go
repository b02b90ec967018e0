package ingest

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkPrepare is ingest's own work per heartbeat (decode, the newest
// state per device, the parent memory, routing) over a fleet of 200,000
// devices in batches of 4,096, without a parent and with one in every
// heartbeat (a gateway per hundred devices, already written): what a
// parent costs the exact path beside Redis.
func BenchmarkPrepare(b *testing.B) {
	const fleet, batch = 200_000, 4096
	ts := time.Now().UnixMilli()
	for _, bc := range []struct {
		name  string
		value func(k int) string
	}{
		{"plain", func(int) string { return fmt.Sprintf(`{"ts":%d}`, ts) }},
		{"parents", func(k int) string { return fmt.Sprintf(`{"ts":%d,"parent":"gw-%06d"}`, ts, k/100) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pr := newPreparer(b)
			var batches [][]chunk
			for first := 0; first < fleet; first += batch {
				batches = append(batches, pr.chunk(first, batch, bc.value))
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
