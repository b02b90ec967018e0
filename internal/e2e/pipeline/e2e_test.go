package pipeline_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// TestEndToEnd is SPEC's core promise: 5,000 devices beat every 200 ms with a
// 1 s timeout; 250 go silent. Exactly those get exactly one timeout each,
// with every field right, and no live device gets one.
func TestEndToEnd(t *testing.T) {
	const (
		devices  = 5000
		silent   = 250
		interval = 200 * time.Millisecond
		timeout  = time.Second
	)
	e := newEnv(t, 8)
	e.cfg.Shards.InitialCount = 16
	e.cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.cfg, app.Hooks{})
	events := e2etest.Collect(t, e.kafka.Brokers(), timeouts, 8)

	ids := make([]string, devices)
	silentAt := make([]time.Time, devices)
	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	for i := range ids {
		ids[i] = fmt.Sprintf("dev-%05d", i)
		if i%(devices/silent) == 0 {
			silentAt[i] = quiet
		}
	}
	f := e2etest.StartFleet(t, e.kafka.Brokers(), ids, interval, silentAt)

	got := e2etest.Gathered{}
	var detect []time.Duration
	got.Until(t, events, 60*time.Second, "not every silent device timed out", func() bool { return f.Fired(got) == silent })
	// Keep the fleet beating a while longer to catch duplicates and false
	// timeouts, then stop flatline before the heartbeats, or every device
	// would time out.
	got.During(events, 1500*time.Millisecond)
	if err := inst.Stop(); err != nil {
		t.Fatalf("flatline stopped with %v", err)
	}
	f.Stop()
	got.Drain(events)

	late := f.Verdict(t, got, timeout, 16)
	for _, evs := range got {
		for _, r := range evs {
			detect = append(detect, time.Duration(r.Ev.DetectedAtMs-r.Ev.DeadlineMs)*time.Millisecond)
			if r.Ev.Class != "" {
				t.Errorf("%s: class %q for a device without one", r.Ev.DeviceID, r.Ev.Class)
			}
		}
	}
	slices.Sort(late)
	slices.Sort(detect)
	t.Logf("%d timeouts; lateness deadline→e2etest.Received p50 %v p99 %v max %v; deadline→detected p50 %v p99 %v",
		len(late), e2etest.Percentile(late, .5), e2etest.Percentile(late, .99), late[len(late)-1], e2etest.Percentile(detect, .5), e2etest.Percentile(detect, .99))
}
