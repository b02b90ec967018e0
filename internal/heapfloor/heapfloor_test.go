package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const floor = 64 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 1600},        // nothing live yet: the floor, no higher (Go's minimum heap scales with GOGC)
		{1 << 20, 1600},  // 1 MiB live: 6,300 % would reach the floor, but the minimum heap would pass it
		{8 << 20, 700},   // 8 MiB live: the goal is 8 + 56 MiB
		{16 << 20, 300},  // 16 + 48
		{31 << 20, 106},  // just under half the floor
		{32 << 20, 100},  // half the floor: Go's default reaches it
		{200 << 20, 100}, // past it: Go's default
		{1 << 40, 100},
	} {
		if got := Percent(c.live, floor); got != c.want {
			t.Errorf("Percent(%d MiB, 64 MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
	if got := Percent(0, 1<<20); got != 100 {
		t.Errorf("Percent(0, 1 MiB) = %d, want 100 (never below Go's default)", got)
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitGOGC collects until GOGC is want, as the floor sets it after a
// collection, and fails the test if it does not become so.
func waitGOGC(t *testing.T, want func() int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
		w := want()
		if got := gogc(); got == w {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("GOGC %d, want %d", got, w)
		}
	}
}

// After every collection the floor sets GOGC from the heap it left live: a
// small heap gets a goal at the floor, a large one Go's default; Stop puts
// back what was set before. (Not parallel: GOGC is the process's.)
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	if debug.SetGCPercent(100) != 100 {
		t.Skip("GOGC is set for this test process")
	}
	const floor = 64 << 20
	f := Start(floor)
	if f == nil {
		t.Skip("GOGC is set in the environment")
	}
	waitGOGC(t, func() int { return Percent(liveHeap(), floor) })
	if got := gogc(); got <= 100 {
		t.Fatalf("GOGC %d with %d MiB live, want above 100", got, liveHeap()>>20)
	}

	big := make([][]byte, 48)
	for k := range big {
		big[k] = make([]byte, 1<<20)
	}
	waitGOGC(t, func() int { return 100 })
	runtime.KeepAlive(big)

	f.Stop()
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d after Stop, want the 100 set before Start", got)
	}
	big = nil
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d after Stop and a collection, want 100 still", got)
	}
}

func TestGOGCInTheEnvironmentTurnsItOff(t *testing.T) {
	t.Setenv("GOGC", "150")
	if f := Start(64 << 20); f != nil {
		f.Stop()
		t.Fatal("Start with GOGC set returned a floor")
	}
}
