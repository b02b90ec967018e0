package cluster_test

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
	e := newEnv(t)
	e.cfg.Shards.InitialCount = 16
	e.cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.cfg, app.Hooks{})
	events := e2etest.Collect(t, e.kafka.Brokers(), e2etest.Timeouts, partitions)
	got := e2etest.Gathered{}

	ids := make([]string, devices)
	silentAt := make([]time.Time, devices)
	at := time.Now().Add(2 * time.Second) // once the fleet is tracked
	for k := range ids {
		ids[k] = fmt.Sprintf("dev-%05d", k)
		if k%(devices/silent) == 0 {
			silentAt[k] = at
		}
	}
	f := e2etest.StartFleet(t, e.kafka.Brokers(), ids, interval, silentAt)

	got.Until(t, events, 45*time.Second, "not every silent device got a timeout", func() bool { return f.Fired(got) == silent })
	// Keep beating a while to catch duplicates and false timeouts.
	got.During(events, 1500*time.Millisecond)
	// Stop flatline before the heartbeats, or every device would time out.
	if err := inst.Stop(); err != nil {
		t.Fatalf("flatline stopped with %v", err)
	}
	f.Stop()
	got.Drain(events)
	late := f.Verdict(t, got, timeout, 16)
	slices.Sort(late)
	t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v", len(late), e2etest.Percentile(late, .5), e2etest.Percentile(late, .99))
}

// TestDoublingOnCluster doubles 16→32 shards on a Redis Cluster while the
// fleet beats and devices go silent at random moments before, during and
// after the migration: the layout finalizes by itself, and every silent
// device gets exactly one timeout, no live one any.
func TestDoublingOnCluster(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Shards.InitialCount = 16
	e.cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.cfg, app.Hooks{})
	events := e2etest.Collect(t, e.kafka.Brokers(), e2etest.Timeouts, partitions)
	got := e2etest.Gathered{}

	r := rand.New(rand.NewPCG(8, 9))
	ids := make([]string, devices)
	silentAt := make([]time.Time, devices)
	begin := time.Now().Add(2 * time.Second)
	for k := range ids {
		ids[k] = fmt.Sprintf("dbl-%05d", k)
	}
	for _, k := range r.Perm(devices)[:silent] {
		silentAt[k] = begin.Add(time.Duration(r.Int64N(int64(5 * time.Second))))
	}
	f := e2etest.StartFleet(t, e.kafka.Brokers(), ids, interval, silentAt)

	// Scale once silences have begun and the first have fired.
	got.During(events, time.Until(begin.Add(1500*time.Millisecond)))
	ctx := context.Background()
	l, err := rebalance.Scale(ctx, inst.Store, 32, time.Now())
	if err != nil {
		t.Fatalf("scale to 32: %v", err)
	}
	sawProgress := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := rebalance.ReadStatus(ctx, inst.Store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if st.Migration.Active {
			sawProgress = sawProgress || st.Migration.Moved > 0 || st.Migration.Misplaced > 0
		} else if st.Layout.Count == 32 && st.Layout.Previous == 0 && st.Layout.Epoch > l.Epoch {
			t.Logf("16→32 finalized after %v (status showed progress: %v)", time.Since(time.UnixMilli(l.SinceMs)).Round(time.Millisecond), sawProgress)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("16→32 did not finalize: layout %+v migration %+v", st.Layout, st.Migration)
		}
		got.During(events, 50*time.Millisecond)
	}
	if !sawProgress {
		t.Error("shards status never showed the migration in progress")
	}
	// Every member sits in its shard under 32, on whichever master.
	misplaced, total, err := rebalance.CountMisplaced(ctx, inst.Store, l)
	if err != nil || misplaced != 0 || total == 0 {
		t.Errorf("after finalizing: %d of %d members misplaced (err %v)", misplaced, total, err)
	}
	got.Until(t, events, 45*time.Second, "not every silent device got a timeout", func() bool { return f.Fired(got) == silent })
	got.During(events, 1500*time.Millisecond)
	if err := inst.Stop(); err != nil {
		t.Fatalf("flatline stopped with %v", err)
	}
	f.Stop()
	got.Drain(events)
	f.Verdict(t, got, timeout, 32)
}
