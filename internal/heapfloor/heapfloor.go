// Package heapfloor keeps the Go collector from running more often than
// the work needs while the heap is small.
//
// Go's collector starts a cycle once the heap has grown by GOGC percent
// (100 by default) over what the last cycle left live. flatline's live heap
// is small — about 10 MiB serving a million devices under 100,000
// heartbeats/s — while every heartbeat allocates on its way through, so at
// GOGC=100 it collected three times a second, each mark phase taking a
// share of the cores that the path from a fetch to the watermark waits
// for. Start lets the heap grow to a floor before a cycle starts: after
// every cycle it sets GOGC so that the next one starts at the floor, or at
// twice the live heap once that is more (GOGC=100, Go's default).
//
// GOGC in the environment turns it off: the operator's setting stands. A
// memory limit (GOMEMLIMIT) still makes the collector run harder near it.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the floor flatline serve runs with.
const Default = 64 << 20

// minHeap is Go's minimum heap goal at GOGC=100; the runtime scales it with
// GOGC, so GOGC above floor/minHeap*100 would put the goal past the floor.
const minHeap = 4 << 20

// Floor is a running heap floor; Stop ends it.
type Floor struct {
	floor uint64
	mu    sync.Mutex
	was   int // GOGC before Start
	done  bool
}

// Start sets GOGC for a heap floor of floor bytes and keeps it set after
// every collection. It returns nil, changing nothing, when the environment
// sets GOGC.
func Start(floor uint64) *Floor {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return nil
	}
	f := &Floor{floor: floor}
	f.was = debug.SetGCPercent(Percent(liveHeap(), floor))
	f.arm()
	return f
}

// Stop ends the floor and restores the GOGC that was set before Start.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.done = true
		debug.SetGCPercent(f.was)
	}
}

// cycle is allocated after every collection; its cleanup runs once the next
// collection found it unreachable. 16 bytes or more and holding a pointer,
// so it is never a tiny allocation batched with others.
type cycle struct{ _ *byte }

func (f *Floor) arm() {
	runtime.AddCleanup(new(cycle), func(f *Floor) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.done {
			return
		}
		debug.SetGCPercent(Percent(liveHeap(), f.floor))
		f.arm()
	}, f)
}

// Percent is the GOGC for a heap floor of floor bytes over a live heap of
// live bytes: the next collection starts at the floor, or at twice the live
// heap once that is more.
func Percent(live, floor uint64) int {
	most := max(100, int(floor*100/minHeap))
	if live == 0 {
		return most
	}
	if 2*live >= floor {
		return 100
	}
	return min(most, int((floor-live)*100/live))
}

// liveHeap is the heap the last collection left live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
