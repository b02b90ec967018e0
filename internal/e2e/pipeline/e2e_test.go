package pipeline_test

import (
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
	e := e2etest.NewEnv(t, 8)
	e.Cfg.Shards.InitialCount = 16
	e.Cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, e.Cfg, app.Hooks{})
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 8)

	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	f := e2etest.StartFleet(t, e.Kafka.Brokers(), e2etest.IDs("dev-", devices), interval, e2etest.SilentEvery(devices, silent, quiet))

	v := f.Finish(t, events, 60*time.Second, e2etest.Want{Timeout: timeout, Shards: 16}, inst)
	var detect []time.Duration
	for _, evs := range events.ByDevice() {
		for _, r := range evs {
			detect = append(detect, time.Duration(r.Ev.DetectedAtMs-r.Ev.DeadlineMs)*time.Millisecond)
			if r.Ev.Class != "" {
				t.Errorf("%s: class %q for a device without one", r.Ev.DeviceID, r.Ev.Class)
			}
		}
	}
	late := v.Late
	slices.Sort(late)
	slices.Sort(detect)
	t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v max %v; deadline→detected p50 %v p99 %v",
		len(late), e2etest.Percentile(late, .5), e2etest.Percentile(late, .99), late[len(late)-1], e2etest.Percentile(detect, .5), e2etest.Percentile(detect, .99))
}
