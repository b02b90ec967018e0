package sample

import "testing"

// Each percentile is the nearest rank, and the sample keeps its order.
func TestDistOfNearestRank(t *testing.T) {
	var ms []float64
	for i := 100; i >= 1; i-- {
		ms = append(ms, float64(i))
	}
	d := DistOf(ms)
	if d.N != 100 || d.Min != 1 || d.P50 != 50 || d.P90 != 90 || d.P99 != 99 || d.Max != 100 {
		t.Fatalf("DistOf(1..100) = %+v", d)
	}
	if ms[0] != 100 {
		t.Fatalf("DistOf sorted its argument: ms[0] = %v", ms[0])
	}
	if got := DistOf([]float64{7}); got.P99 != 7 || got.P50 != 7 {
		t.Fatalf("DistOf of one sample = %+v", got)
	}
	if got := DistOf(nil); got.N != 0 {
		t.Fatalf("DistOf(nil) = %+v", got)
	}
}
