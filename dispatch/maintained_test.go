package dispatch

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// A device a maintenance window released fires a timeout carrying the
// window's id and no storm_id, and it is not counted toward storms; the
// timeouts published beside it are, and carry the storm's id.
func TestMaintainedTimeoutsCarryTheWindowAndAreNotCountedTowardStorms(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, testParts, testTopic)
	var counted atomic.Int64
	p, err := New(DefaultConfig(), testKafkaConfig(k.Brokers()), Options{
		Policy: testPolicy(), Logger: slog.New(slog.DiscardHandler),
		StormID:   func() string { return "s-1" },
		Published: func(timeouts int, _ string, _ int) { counted.Add(int64(timeouts)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx := testenv.Context(t, 30*time.Second)
	end := time.Now().Add(-2 * time.Second).UnixMilli()
	deadline := end + 60_000
	held := []shard.Member{{ID: "held-1", Score: shard.Score(deadline, 0)}}
	plain := []shard.Member{{ID: "plain-1", Score: shard.Score(deadline, 0)}}
	if err := p.Noted(ctx, 3, held, nil, map[string]timeouts.Note{"held-1": {MaintenanceID: "m-1"}}, time.UnixMilli(deadline+10)); err != nil {
		t.Fatal(err)
	}
	if err := p.Timeouts(ctx, 3, plain, nil, time.UnixMilli(deadline+10)); err != nil {
		t.Fatal(err)
	}
	got := map[string]Event{}
	for _, r := range testenv.ReadTopic(t, k.Brokers(), testTopic, testParts) {
		var e Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		got[e.DeviceID] = e
	}
	if e := got["held-1"]; e.MaintenanceID != "m-1" || e.StormID != "" || e.LastSeenMs != end || e.DeadlineMs != deadline {
		t.Errorf("held device's timeout %+v, want maintenance_id m-1, no storm_id, last seen at the end %d", e, end)
	}
	if e := got["plain-1"]; e.MaintenanceID != "" || e.StormID != "s-1" {
		t.Errorf("plain timeout %+v, want storm_id s-1 and no maintenance_id", e)
	}
	if n := counted.Load(); n != 1 {
		t.Errorf("%d timeouts counted toward storms, want only the plain one", n)
	}
}
