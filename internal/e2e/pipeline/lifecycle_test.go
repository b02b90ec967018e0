package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/shard"
)

// send produces the heartbeats kv (key, value, key, value, ...) stamped at.
func send(t *testing.T, brokers []string, at time.Time, kv ...string) {
	t.Helper()
	var msgs []kafka.Message
	for k := 0; k+1 < len(kv); k += 2 {
		msgs = append(msgs, kafka.Message{Key: []byte(kv[k]), Value: []byte(kv[k+1]), Time: at})
	}
	e2etest.Produce(t, brokers, e2etest.Signals, msgs...)
}

// Timeout events carry exact class, timeout_ms and last_seen_ms across
// classes, per-message overrides and fallbacks, with one ZSET member per
// device (class in the score, the timeout in a side hash only when it
// differs from the class), exact or coalesced.
func TestEventFieldsAcrossClassesAndOverrides(t *testing.T) {
	for _, window := range []time.Duration{0, 2 * time.Second} {
		t.Run(fmt.Sprintf("coalesce_window=%s", window), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 2, 4)
			e.Cfg.Timeouts.Classes = map[string]time.Duration{"sensor": 2 * time.Second, "gateway": 3 * time.Second}
			e.Cfg.Ingest.CoalesceWindow = window
			inst := e2etest.Start(t, e.Cfg, app.Hooks{})
			events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 2)
			now := time.Now()
			ts := now.UnixMilli()
			type want struct {
				value     string
				class     string
				timeoutMs int64
				override  bool
			}
			cases := map[string]want{
				"sensor":           {`{"class":"sensor","ts":%d}`, "sensor", 2000, false},
				"gateway-1500":     {`{"class":"gateway","timeout_ms":1500,"ts":%d}`, "gateway", 1500, true},
				"none-2500":        {`{"timeout_ms":2500,"ts":%d}`, "", 2500, true},
				"unknown-class":    {`{"class":"blimp","ts":%d}`, "", 1000, false},
				"sensor-same":      {`{"class":"sensor","timeout_ms":2000,"ts":%d}`, "sensor", 2000, false},
				"gateway-huge":     {`{"class":"gateway","timeout_ms":99999999999999,"ts":%d}`, "gateway", 3000, false},
				"gateway-negative": {`{"class":"gateway","timeout_ms":-5,"ts":%d}`, "gateway", 3000, false},
				"plain":            {`{"ts":%d}`, "", 1000, false},
			}
			var kv []string
			for id, c := range cases {
				kv = append(kv, id, fmt.Sprintf(c.value, ts))
			}
			send(t, e.Kafka.Brokers(), now, kv...)
			// Storage while tracked: one member per device; an override
			// entry only where the timeout differs from the class's.
			e2etest.Eventually(t, 10*time.Second, "the devices tracked", func() bool {
				n, err := inst.Store.Tracked(context.Background(), 4)
				return err == nil && n == int64(len(cases))
			})
			for id, c := range cases {
				i := shard.Of(shard.Hash(id), 4)
				score, ok, err := inst.Store.Score(context.Background(), i, id)
				if err != nil || !ok {
					t.Fatalf("%s not tracked", id)
				}
				_, meta := shard.DecodeScore(score)
				o, err := inst.Store.Overrides(context.Background(), i, []string{id})
				if err != nil {
					t.Fatal(err)
				}
				_, hasOverride := o[id]
				if meta.Has(shard.FlagOverride) != c.override || hasOverride != c.override {
					t.Errorf("%s: override flag %v, entry %v; want %v", id, meta.Has(shard.FlagOverride), hasOverride, c.override)
				}
				if meta.Has(shard.FlagPadded) != (window > 0) {
					t.Errorf("%s: padded flag %v with window %s", id, meta.Has(shard.FlagPadded), window)
				}
			}
			got := map[string]e2etest.Received{}
			deadline := time.Now().Add(30 * time.Second)
			for len(got) < len(cases) {
				r, ok := events.Next(time.Until(deadline))
				if !ok {
					t.Fatalf("%d of %d devices timed out", len(got), len(cases))
				}
				if _, dup := got[r.Ev.DeviceID]; dup {
					t.Errorf("%s: second timeout", r.Ev.DeviceID)
				}
				got[r.Ev.DeviceID] = r
			}
			for id, c := range cases {
				ev := got[id].Ev
				if ev.Class != c.class || ev.TimeoutMs != c.timeoutMs || ev.LastSeenMs != ts || ev.DeadlineMs != ts+c.timeoutMs {
					t.Errorf("%s: class %q timeout %d last_seen %d deadline %d; want %q %d %d %d",
						id, ev.Class, ev.TimeoutMs, ev.LastSeenMs, ev.DeadlineMs, c.class, c.timeoutMs, ts, ts+c.timeoutMs)
				}
				fired := ev.DetectedAtMs
				if fired < ev.DeadlineMs || (window > 0 && fired < ev.DeadlineMs+window.Milliseconds()) {
					t.Errorf("%s: detected at %d, before deadline %d + padding %s", id, fired, ev.DeadlineMs, window)
				}
			}
			// Nothing is left behind once every device fired: no member, no override.
			for i := 0; i < 4; i++ {
				n, _ := inst.Store.Client().HLen(context.Background(), inst.Store.Keys().Overrides(i)).Result()
				if n != 0 {
					t.Errorf("shard %d keeps %d override entries after its devices fired", i, n)
				}
			}
		})
	}
}

// A device that timed out and beats again within the recovery window
// produces one recovered event with down_for_ms right; one that beats after
// the window produces none (it is tracked again); the down set is pruned
// after the window.
func TestRecoveredEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, 1) // one shard, so every fire prunes the same down set
	e.Cfg.Dispatch.RecoveryWindow = 4 * time.Second
	inst := e2etest.Start(t, e.Cfg, app.Hooks{MinDownMemory: time.Millisecond})
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 1)

	t0 := time.Now()
	beat := func(at time.Time, ids ...string) {
		var kv []string
		for _, id := range ids {
			kv = append(kv, id, fmt.Sprintf(`{"ts":%d}`, at.UnixMilli()))
		}
		send(t, e.Kafka.Brokers(), at, kv...)
	}
	back := []string{"back-1", "back-2", "back-3"}
	beat(t0, append(back, "late", "gone")...)
	next := func(what string) e2etest.Received {
		t.Helper()
		r, ok := events.Next(20 * time.Second)
		if !ok {
			t.Fatalf("no event: waiting for %s", what)
		}
		return r
	}
	downSince := map[string]int64{}
	for len(downSince) < 5 {
		r := next("the first timeouts")
		if r.Ev.Type != "timeout" {
			t.Fatalf("unexpected %+v", r.Ev)
		}
		downSince[r.Ev.DeviceID] = r.Ev.DeadlineMs
	}
	// Back within the window.
	seen := time.Now()
	beat(seen, back...)
	for range back {
		r := next("recovered events")
		ev := r.Ev
		if ev.Type != "recovered" || ev.DownSinceMs != downSince[ev.DeviceID] || ev.SeenAtMs != seen.UnixMilli() ||
			ev.DownForMs != ev.SeenAtMs-ev.DownSinceMs || ev.EventID != fmt.Sprintf("%s/%d/r", ev.DeviceID, ev.SeenAtMs) {
			t.Errorf("recovered event %+v; want down since %d, seen at %d", ev, downSince[ev.DeviceID], seen.UnixMilli())
		}
	}
	// The recovered devices are tracked again: they time out once more.
	for range back {
		if r := next("second timeouts"); r.Ev.Type != "timeout" {
			t.Errorf("want a second timeout, got %+v", r.Ev)
		}
	}
	// "late" comes back after the window: no recovered event, but tracked.
	time.Sleep(time.Until(time.UnixMilli(downSince["late"]).Add(e.Cfg.Dispatch.RecoveryWindow + 500*time.Millisecond)))
	lateAt := time.Now()
	beat(lateAt, "late")
	r := next("the late device's new timeout")
	if r.Ev.Type != "timeout" || r.Ev.DeviceID != "late" || r.Ev.LastSeenMs != lateAt.UnixMilli() {
		t.Errorf("after the window: %+v, want only a new timeout of late", r.Ev)
	}
	// That fire prunes the down set of what is older than the window (right
	// after Kafka acknowledged it): "gone" (down since t0+1s) is forgotten.
	downSet := func() []string {
		down, err := inst.Store.Client().ZRange(context.Background(), inst.Store.Keys().Down(0), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return down
	}
	e2etest.Eventually(t, 5*time.Second, fmt.Sprintf("the down set to forget \"gone\", past the %s window", e.Cfg.Dispatch.RecoveryWindow), func() bool {
		return !slices.Contains(downSet(), "gone")
	})
	if !slices.Contains(downSet(), "late") {
		t.Error("the late device's new timeout is not remembered as down")
	}
	if n := events.Unread(); n != 0 {
		t.Errorf("%d unexpected events left", n)
	}
}
