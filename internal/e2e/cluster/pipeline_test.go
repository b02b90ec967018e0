package cluster_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/rebalance"
)

// TestEndToEndOnCluster is SPEC's core promise on a Redis Cluster: 16 shards
// over 3 masters, 2,000 devices beating every 200 ms with a 1 s timeout,
// 100 of them going silent: exactly those get exactly one timeout each, and
// no live device gets one.
func TestEndToEndOnCluster(t *testing.T) {
	t.Parallel()
	run := startOnCluster(t)

	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	run.StartFleet(t, "dev-", run.Every(quiet))

	late := run.Finish(t, 45*time.Second, e2etest.ExactlyOnce).Late
	slices.Sort(late)
	t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v", len(late), e2etest.Percentile(late, .5), e2etest.Percentile(late, .99))
}

// TestDoublingOnCluster doubles 16→32 shards on a Redis Cluster while the
// fleet beats and devices go silent at random moments before, during and
// after the migration: the layout finalizes by itself, and every silent
// device gets exactly one timeout, no live one any.
func TestDoublingOnCluster(t *testing.T) {
	t.Parallel()
	run := startOnCluster(t)
	inst, events := run.Inst, run.Events

	begin := time.Now().Add(2 * time.Second)
	f := run.StartFleet(t, "dbl-", run.Schedule(rand.New(rand.NewPCG(8, 9)), begin, begin.Add(5*time.Second)))

	// Scale once silences have begun and the first have fired.
	e2etest.Eventually(t, 30*time.Second, "the first silent device to time out", func() bool { return f.Fired(events) > 0 })
	l := e2etest.Rescale(t, inst, 16, 32, 30*time.Second)
	// Every member sits in its shard under 32, on whichever master.
	misplaced, total, err := rebalance.CountMisplaced(context.Background(), inst.Store, l)
	if err != nil || misplaced != 0 || total == 0 {
		t.Errorf("after finalizing: %d of %d members misplaced (err %v)", misplaced, total, err)
	}
	f.Finish(t, events, 45*time.Second, e2etest.Want{Timeout: run.Timeout, Shards: 32}, inst)
}
