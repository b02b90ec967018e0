// Package sample holds what flatline-bench and bench/peers (a module of its
// own) measure alike: the devices a scenario drives, named the same way,
// and the summary of a sample of latencies.
package sample

import (
	"fmt"
	"math"
	"slices"
)

// DeviceIDs returns n ids "<prefix><zero-padded number>", like simulate's.
func DeviceIDs(prefix string, n int) []string {
	width := len(fmt.Sprint(n - 1))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%0*d", prefix, width, i)
	}
	return ids
}

// Dist summarises a sample of durations in milliseconds (negative: early).
type Dist struct {
	N   int     `json:"n"`
	Min float64 `json:"min_ms"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// DistOf summarises ms; it leaves ms as it is.
func DistOf(ms []float64) Dist {
	if len(ms) == 0 {
		return Dist{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	q := func(p float64) float64 {
		// Nearest rank: the smallest value with at least p of the sample
		// at or below it.
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(k, len(s)-1))]
	}
	return Dist{N: len(s), Min: s[0], P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: s[len(s)-1]}
}

// String is the distribution on one line.
func (d Dist) String() string {
	return fmt.Sprintf("p50 %.0f / p99 %.0f / max %.0f ms (min %.0f)", d.P50, d.P99, d.Max, d.Min)
}
