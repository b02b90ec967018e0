package pipeline_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// TestScaleUnderLoad doubles the shards 16→32→64→128, then halves them back
// to 64, while a fleet beats every 200 ms with a 1 s timeout and some
// devices go silent at random moments: exactly one timeout per silent
// device, none for live ones, and each migration finalizes by itself with
// `shards status` showing progress.
func TestScaleUnderLoad(t *testing.T) {
	devices, silent := 20000, 1000
	if raceEnabled || testing.Short() {
		// The race detector slows everything ~10×; keep the rate the
		// machine can carry so the test checks correctness, not capacity.
		devices, silent = 4000, 200
	}
	// Every 200 ms with a 1 s timeout.
	run := e2etest.Scenario{Devices: devices, Silent: silent, Partitions: 8, Shards: 16}.Start(t, nil)
	inst, events := run.Inst, run.Events

	// Silences spread over the whole scaling run.
	begin := time.Now().Add(2 * time.Second)
	f := run.StartFleet(t, "scale-", run.Schedule(rand.New(rand.NewPCG(5, 6)), begin, begin.Add(10*time.Second)))

	// Scale while devices go silent and time out: the first change once
	// the first silent device timed out, each next one a while after the
	// previous one finalized.
	e2etest.Eventually(t, 30*time.Second, "the first silent device to time out", func() bool { return f.Fired(events) > 0 })
	from := 16
	for _, to := range []int{32, 64, 128, 64} {
		e2etest.Rescale(t, inst, from, to, 60*time.Second)
		from = to
		time.Sleep(1500 * time.Millisecond) // the fleet beats on under the new layout before the next change
	}
	late := f.Finish(t, events, 90*time.Second, e2etest.Want{Timeout: run.Timeout, Shards: 128}, inst).Late
	t.Logf("%d devices, %d silent: lateness %s", devices, silent, e2etest.Spread(late))
}
