package ingest

import "sync"

// latest gathers per-partition values that only move forward (written
// offsets for commitLoop, watermarks for raiseLoop) and hands the newest
// to a background loop, so the writer never waits for Kafka's or Redis's
// answer to them.
type latest struct {
	mu      sync.Mutex
	pending map[int]int64
	wake    chan struct{}
}

func newLatest() *latest {
	return &latest{pending: make(map[int]int64), wake: make(chan struct{}, 1)}
}

func (c *latest) add(offsets map[int]int64) {
	c.mu.Lock()
	for p, off := range offsets {
		if off > c.pending[p] {
			c.pending[p] = off
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *latest) take() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	out := c.pending
	c.pending = make(map[int]int64, len(out))
	return out
}
