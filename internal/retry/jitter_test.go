package retry

import (
	"testing"
	"time"
)

func TestJitterStaysWithinHalfAndWhole(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 2, 3, 50 * time.Millisecond, 2 * time.Second} {
		for i := 0; i < 1000; i++ {
			if got := Jitter(d); got < d/2 || got > d {
				t.Fatalf("Jitter(%v) = %v, want within [%v, %v]", d, got, d/2, d)
			}
		}
	}
	if got := Jitter(-time.Second); got != -time.Second {
		t.Fatalf("Jitter(-1s) = %v, want it unchanged", got)
	}
}
