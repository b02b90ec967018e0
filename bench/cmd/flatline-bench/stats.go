package main

import (
	"sort"
)

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
