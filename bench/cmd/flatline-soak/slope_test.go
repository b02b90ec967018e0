package main

import (
	"math"
	"testing"
)

func TestLeastSquaresRecoversALineAndItsError(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	f := leastSquares(x, []float64{3, 5, 7, 9, 11})
	if f.Slope != 2 || f.SE != 0 || f.N != 5 {
		t.Fatalf("exact line: %+v, want slope 2, SE 0", f)
	}
	// A flat series with scatter: slope 0, and an SE the scatter explains.
	f = leastSquares(x, []float64{1, -1, 0, 1, -1})
	if math.Abs(f.Slope-(-0.2)) > 1e-12 || !(f.SE > 0) {
		t.Fatalf("scatter: %+v, want slope -0.2 and a positive SE", f)
	}
	if f := leastSquares([]float64{1}, []float64{1}); f.Slope != 0 || !math.IsNaN(f.SE) {
		t.Fatalf("one point: %+v", f)
	}
}
