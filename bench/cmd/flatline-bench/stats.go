package main

import (
	"math"
	"sort"
)

// Dist summarises a sample of durations in milliseconds.
type Dist struct {
	N   int     `json:"n"`
	Min float64 `json:"min_ms"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func distOf(ms []float64) Dist {
	if len(ms) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		// Nearest rank: the smallest value with at least p of the sample
		// at or below it.
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(k, len(s)-1))]
	}
	return Dist{N: len(s), Min: s[0], P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: s[len(s)-1]}
}

func sortBy[T any](s []T, key func(T) float64) {
	sort.SliceStable(s, func(i, j int) bool { return key(s[i]) < key(s[j]) })
}

// medianOf is the median of f over xs (the upper one of an even count; 0
// for none).
func medianOf[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	vs := make([]float64, len(xs))
	for k, x := range xs {
		vs[k] = f(x)
	}
	sortBy(vs, func(v float64) float64 { return v })
	return vs[len(vs)/2]
}
