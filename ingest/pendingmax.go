package ingest

import "sync"

// pendingMax holds, per partition, the highest value not yet handed to a
// background loop: the written offsets for commitLoop, the watermarks for
// raiser.run. Both only ever move forward, so the newest value stands for
// every older one and the loop can skip what it missed. The writer adds
// without waiting for Kafka's or Redis's answer, and the loop takes the
// whole map when it wakes.
type pendingMax struct {
	mu      sync.Mutex
	pending map[int]int64
	// wake holds one signal when pending has something the loop has not
	// taken; adding to a full wake drops the signal, not the value.
	wake chan struct{}
}

func newPendingMax() *pendingMax {
	return &pendingMax{pending: make(map[int]int64), wake: make(chan struct{}, 1)}
}

// add raises each partition's pending value to vals', and wakes the loop.
func (c *pendingMax) add(vals map[int]int64) {
	c.mu.Lock()
	for p, v := range vals {
		if v > c.pending[p] {
			c.pending[p] = v
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns the pending values and forgets them, or nil if there are
// none. The caller owns the map.
func (c *pendingMax) take() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	out := c.pending
	c.pending = make(map[int]int64, len(out))
	return out
}
