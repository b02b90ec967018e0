package main

import "math"

// fit is a least-squares line through (x, y).
type fit struct {
	N     int
	Slope float64
	// SE is the slope's standard error: what the scatter around the line
	// leaves uncertain about it (NaN below three points).
	SE float64
}

// leastSquares fits y = a + b·x.
func leastSquares(x, y []float64) fit {
	n := len(x)
	f := fit{N: n, SE: math.NaN()}
	if n < 2 {
		return f
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxx, sxy float64
	for i := range x {
		sxx += (x[i] - mx) * (x[i] - mx)
		sxy += (x[i] - mx) * (y[i] - my)
	}
	if sxx == 0 {
		return f
	}
	f.Slope = sxy / sxx
	if n > 2 {
		var ssr float64
		for i := range x {
			r := y[i] - (my + f.Slope*(x[i]-mx))
			ssr += r * r
		}
		f.SE = math.Sqrt(ssr/float64(n-2)) / math.Sqrt(sxx)
	}
	return f
}
