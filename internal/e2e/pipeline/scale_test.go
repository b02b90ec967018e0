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
	e := newEnv(t, 8)
	e.cfg.Shards.InitialCount = 16
	e.cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.cfg, app.Hooks{})
	events := e2etest.Collect(t, e.kafka.Brokers(), timeouts, 8)

	r := rand.New(rand.NewPCG(5, 6))
	ids := make([]string, devices)
	silentAt := make([]time.Time, devices)
	begin := time.Now().Add(2 * time.Second)
	for i := range ids {
		ids[i] = fmt.Sprintf("scale-%05d", i)
	}
	for _, i := range r.Perm(devices)[:silent] {
		// Silences spread over the whole scaling run.
		silentAt[i] = begin.Add(time.Duration(r.Int64N(int64(10 * time.Second))))
	}
	f := e2etest.StartFleet(t, e.kafka.Brokers(), ids, 200*time.Millisecond, silentAt)

	got := e2etest.Gathered{}
	ctx := context.Background()
	// Scale while devices go silent and time out: the first change once
	// silences have begun, each next one a while after the previous one
	// finalized.
	time.Sleep(time.Until(begin.Add(1500 * time.Millisecond)))
	from := 16
	for _, to := range []int{32, 64, 128, 64} {
		l, err := rebalance.Scale(ctx, inst.Store, to, time.Now())
		if err != nil {
			t.Fatalf("scale to %d: %v", to, err)
		}
		sawProgress := false
		deadline := time.Now().Add(60 * time.Second)
		for {
			got.Drain(events)
			st, err := rebalance.ReadStatus(ctx, inst.Store, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if st.Migration.Active {
				sawProgress = sawProgress || st.Migration.Moved > 0 || st.Migration.Misplaced > 0
			} else if st.Layout.Count == to && st.Layout.Previous == 0 && st.Layout.Epoch > l.Epoch {
				t.Logf("%d→%d finalized after %s (status showed progress: %v)", from, to, time.Since(time.UnixMilli(l.SinceMs)).Round(time.Millisecond), sawProgress)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("scale to %d did not finalize: %+v", to, st.Migration)
			}
			got.During(events, 50*time.Millisecond)
		}
		if !sawProgress {
			t.Errorf("shards status never showed the %d→%d migration in progress", from, to)
		}
		from = to
		got.During(events, 1500*time.Millisecond)
	}
	// Wait for the silent devices' timeouts, then a settle period.
	got.Until(t, events, 90*time.Second, "not every silent device timed out", func() bool { return f.Fired(got) == f.Silent() })
	got.During(events, 1500*time.Millisecond) // late duplicates or false timeouts
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	got.Drain(events)
	late := f.Verdict(t, got, timeout, 128)
	slices.Sort(late)
	if len(late) > 0 {
		t.Logf("%d devices, %d silent: lateness p50 %v p99 %v max %v", devices, silent, e2etest.Percentile(late, .5), e2etest.Percentile(late, .99), late[len(late)-1])
	}
}
