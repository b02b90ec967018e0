package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/rebalance"
)

const (
	devices  = 2000
	silent   = 100
	interval = 200 * time.Millisecond
	timeout  = time.Second
)

// TestEndToEndOnCluster is SPEC's core promise on a Redis Cluster: 16 shards
// over 3 masters, 2,000 devices beating every 200 ms with a 1 s timeout,
// 100 of them going silent: exactly those get exactly one timeout each, and
// no live device gets one.
func TestEndToEndOnCluster(t *testing.T) {
	t.Parallel()
	inst, events, brokers := startOnCluster(t)

	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	f := e2etest.StartFleet(t, brokers, e2etest.IDs("dev-", devices), interval, e2etest.SilentEvery(devices, silent, quiet))

	late := f.Finish(t, events, 45*time.Second, e2etest.Want{Timeout: timeout, Shards: 16}, inst).Late
	slices.Sort(late)
	t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v", len(late), e2etest.Percentile(late, .5), e2etest.Percentile(late, .99))
}

// TestDoublingOnCluster doubles 16→32 shards on a Redis Cluster while the
// fleet beats and devices go silent at random moments before, during and
// after the migration: the layout finalizes by itself, and every silent
// device gets exactly one timeout, no live one any.
func TestDoublingOnCluster(t *testing.T) {
	t.Parallel()
	inst, events, brokers := startOnCluster(t)

	begin := time.Now().Add(2 * time.Second)
	silentAt := e2etest.SilentSchedule(rand.New(rand.NewPCG(8, 9)), devices, silent, begin, begin.Add(5*time.Second))
	f := e2etest.StartFleet(t, brokers, e2etest.IDs("dbl-", devices), interval, silentAt)

	// Scale once silences have begun and the first have fired.
	e2etest.Eventually(t, 30*time.Second, "the first silent device to time out", func() bool { return f.Fired(events) > 0 })
	ctx := context.Background()
	l, err := rebalance.Scale(ctx, inst.Store, 32, time.Now())
	if err != nil {
		t.Fatalf("scale to 32: %v", err)
	}
	sawProgress := false
	e2etest.EventuallyNil(t, 30*time.Second, "16→32 to finalize", func() error {
		st, err := rebalance.ReadStatus(ctx, inst.Store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if st.Migration.Active {
			sawProgress = sawProgress || st.Migration.Moved > 0 || st.Migration.Misplaced > 0
		} else if st.Layout.Count == 32 && st.Layout.Previous == 0 && st.Layout.Epoch > l.Epoch {
			return nil
		}
		return fmt.Errorf("layout %+v migration %+v", st.Layout, st.Migration)
	})
	t.Logf("16→32 finalized after %v (status showed progress: %v)", time.Since(time.UnixMilli(l.SinceMs)).Round(time.Millisecond), sawProgress)
	if !sawProgress {
		t.Error("shards status never showed the migration in progress")
	}
	// Every member sits in its shard under 32, on whichever master.
	misplaced, total, err := rebalance.CountMisplaced(ctx, inst.Store, l)
	if err != nil || misplaced != 0 || total == 0 {
		t.Errorf("after finalizing: %d of %d members misplaced (err %v)", misplaced, total, err)
	}
	f.Finish(t, events, 45*time.Second, e2etest.Want{Timeout: timeout, Shards: 32}, inst)
}
