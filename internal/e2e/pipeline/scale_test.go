package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/rebalance"
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
	const timeout = time.Second
	e := e2etest.NewEnv(t, 8)
	e.Cfg.Shards.InitialCount = 16
	e.Cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.Cfg, app.Hooks{})
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 8)

	// Silences spread over the whole scaling run.
	begin := time.Now().Add(2 * time.Second)
	silentAt := e2etest.SilentSchedule(rand.New(rand.NewPCG(5, 6)), devices, silent, begin, begin.Add(10*time.Second))
	f := e2etest.StartFleet(t, e.Kafka.Brokers(), e2etest.IDs("scale-", devices), 200*time.Millisecond, silentAt)

	ctx := context.Background()
	// Scale while devices go silent and time out: the first change once
	// the first silent device timed out, each next one a while after the
	// previous one finalized.
	e2etest.Eventually(t, 30*time.Second, "the first silent device to time out", func() bool { return f.Fired(events) > 0 })
	from := 16
	for _, to := range []int{32, 64, 128, 64} {
		l, err := rebalance.Scale(ctx, inst.Store, to, time.Now())
		if err != nil {
			t.Fatalf("scale to %d: %v", to, err)
		}
		sawProgress := false
		e2etest.EventuallyNil(t, 60*time.Second, fmt.Sprintf("the scale to %d to finalize", to), func() error {
			st, err := rebalance.ReadStatus(ctx, inst.Store, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.Migration.Active {
				sawProgress = sawProgress || st.Migration.Moved > 0 || st.Migration.Misplaced > 0
			} else if st.Layout.Count == to && st.Layout.Previous == 0 && st.Layout.Epoch > l.Epoch {
				return nil
			}
			return fmt.Errorf("migration %+v", st.Migration)
		})
		t.Logf("%d→%d finalized after %s (status showed progress: %v)", from, to, time.Since(time.UnixMilli(l.SinceMs)).Round(time.Millisecond), sawProgress)
		if !sawProgress {
			t.Errorf("shards status never showed the %d→%d migration in progress", from, to)
		}
		from = to
		time.Sleep(1500 * time.Millisecond) // the fleet beats on under the new layout before the next change
	}
	late := f.Finish(t, events, 90*time.Second, e2etest.Want{Timeout: timeout, Shards: 128}, inst).Late
	slices.Sort(late)
	if len(late) > 0 {
		t.Logf("%d devices, %d silent: lateness p50 %v p99 %v max %v", devices, silent, e2etest.Percentile(late, .5), e2etest.Percentile(late, .99), late[len(late)-1])
	}
}
