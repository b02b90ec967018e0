package pipeline_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// newEnv is the environment of a test that starts its own instances:
// partitions partitions, shards shards, and a default timeout of 1 s.
func newEnv(t *testing.T, partitions, shards int) *e2etest.Env {
	t.Helper()
	e := e2etest.NewEnv(t, partitions)
	e.Cfg.Shards.InitialCount = shards
	e.Cfg.Timeouts.Default = time.Second
	return e
}

// TestEndToEnd is the core promise (docs/design.md, "The contract"): 5,000 devices beat every 200 ms with a
// 1 s timeout; 250 go silent. Exactly those get exactly one timeout each,
// with every field right, and no live device gets one.
func TestEndToEnd(t *testing.T) {
	// Every 200 ms with a 1 s timeout.
	run := e2etest.Scenario{Devices: 5000, Silent: 250, Partitions: 8, Shards: 16}.Start(t, nil)

	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	run.StartFleet(t, "dev-", run.Every(quiet))

	v := run.Finish(t, 60*time.Second, e2etest.ExactlyOnce)
	var detect []time.Duration
	for _, evs := range run.Events.ByDevice() {
		for _, r := range evs {
			detect = append(detect, time.Duration(r.Ev.DetectedAtMs-r.Ev.DeadlineMs)*time.Millisecond)
			if r.Ev.Class != "" {
				t.Errorf("%s: class %q for a device without one", r.Ev.DeviceID, r.Ev.Class)
			}
		}
	}
	t.Logf("%d timeouts; lateness deadline→received %s; deadline→detected %s", len(v.Late), e2etest.Spread(v.Late), e2etest.Spread(detect))
}
