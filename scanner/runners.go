package scanner

import (
	"context"
	"sync"
	"time"
)

// passRunners run the shards' passes. A pass goes to a runner waiting for
// one, else to a goroutine of its own, so no shard waits for another's
// pass. The runners outlive their passes: a pass does not grow a fresh
// goroutine's stack again each time (runtime.newstack and copystack took
// about a tenth of the CPU of a scanner under a trickle of deadlines when
// every pass started a goroutine of its own).
type passRunners struct {
	work chan *shardScanner
	wg   sync.WaitGroup
}

// passRunnerCount is how many runners wait for passes: enough for the
// shards woken together by one deadline or one watermark advance.
const passRunnerCount = 4

// start starts n runners, which return once ctx ends.
func (p *passRunners) start(ctx context.Context, n int) {
	p.work = make(chan *shardScanner)
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for {
				select {
				case sc := <-p.work:
					sc.run()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

// pass runs sc's pass (shardScanner.run) on a waiting runner, or on a
// goroutine of its own when none waits. It never blocks.
func (p *passRunners) pass(sc *shardScanner) {
	select {
	case p.work <- sc:
	default:
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			sc.run()
		}()
	}
}

// wait waits, at most d, for the runners (once their ctx ended) and the
// passes under way, and reports whether they all returned.
func (p *passRunners) wait(d time.Duration) bool {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
