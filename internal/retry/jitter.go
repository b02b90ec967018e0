package retry

import (
	"math/rand/v2"
	"time"
)

// Jitter returns a random wait in [d/2, d], so that parts that fail
// together (instances behind one broker) do not retry in lockstep.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}
