package app_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/app"
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
	inst := start(t, e.cfg, app.Hooks{})
	events := collect(t, e.kafka.Brokers(), timeouts, 8)

	w := newWriter(e.kafka.Brokers(), signals)
	defer w.Close()
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("dev-%05d", i)
	}
	isSilent := func(i int) bool { return i%(devices/silent) == 0 }
	lastBeat := make(map[string]int64)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beats := make(chan struct{})
	silentAt := time.Now().Add(2 * time.Second) // after the fleet is tracked
	go func() {
		defer close(beats)
		msgs := make([]kafka.Message, 0, devices)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			now := time.Now()
			msgs = msgs[:0]
			for i, id := range ids {
				if isSilent(i) && now.After(silentAt) {
					continue
				}
				ms := now.UnixMilli()
				msgs = append(msgs, kafka.Message{Key: []byte(id), Value: []byte(`{"device_id":"` + id + `","ts":` + strconv.FormatInt(ms, 10) + `}`), Time: now})
				if isSilent(i) {
					lastBeat[id] = ms
				}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() == nil {
					t.Errorf("produce heartbeats: %v", err)
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	got := make(map[string][]received)
	var late, detect []time.Duration
	add := func(r received) {
		got[r.ev.DeviceID] = append(got[r.ev.DeviceID], r)
		late = append(late, r.at.Sub(time.UnixMilli(r.ev.DeadlineMs)))
		detect = append(detect, time.Duration(r.ev.DetectedAtMs-r.ev.DeadlineMs)*time.Millisecond)
	}
	deadline := time.After(60 * time.Second)
	for len(got) < silent {
		select {
		case r := <-events:
			add(r)
		case <-deadline:
			t.Fatalf("timed out: %d of %d silent devices got a timeout", len(got), silent)
		}
	}
	// All expected timeouts are in: keep the fleet beating a while longer to
	// catch duplicates and false timeouts.
	settle := time.After(1500 * time.Millisecond)
collecting:
	for {
		select {
		case r := <-events:
			add(r)
		case <-settle:
			break collecting
		}
	}
	// Stop flatline before the heartbeats, or every device would time out.
	if err := inst.stop(); err != nil {
		t.Fatalf("flatline stopped with %v", err)
	}
	cancel()
	<-beats
	for len(events) > 0 {
		add(<-events)
	}

	for i, id := range ids {
		evs := got[id]
		if !isSilent(i) {
			if len(evs) > 0 {
				t.Errorf("live device %s got %d timeouts: %+v", id, len(evs), evs[0].ev)
			}
			continue
		}
		if len(evs) != 1 {
			t.Errorf("silent device %s got %d timeouts, want exactly 1", id, len(evs))
			continue
		}
		r := evs[0]
		ev := r.ev
		if r.key != id || ev.DeviceID != id || ev.Type != "timeout" {
			t.Errorf("%s: key %q, event %+v", id, r.key, ev)
		}
		if ev.DeadlineMs-ev.LastSeenMs != ev.TimeoutMs || ev.TimeoutMs != timeout.Milliseconds() {
			t.Errorf("%s: deadline %d - last_seen %d != timeout %d", id, ev.DeadlineMs, ev.LastSeenMs, ev.TimeoutMs)
		}
		if ev.LastSeenMs != lastBeat[id] {
			t.Errorf("%s: last_seen_ms %d, but its last heartbeat had ts %d", id, ev.LastSeenMs, lastBeat[id])
		}
		if ev.EventID != id+"/"+strconv.FormatInt(ev.DeadlineMs, 10) {
			t.Errorf("%s: event_id %q", id, ev.EventID)
		}
		if ev.DetectedAtMs < ev.DeadlineMs {
			t.Errorf("%s: detected at %d before its deadline %d", id, ev.DetectedAtMs, ev.DeadlineMs)
		}
		if ev.Shard < 0 || ev.Shard >= 16 || ev.Class != "" {
			t.Errorf("%s: shard %d class %q", id, ev.Shard, ev.Class)
		}
	}
	slices.Sort(late)
	slices.Sort(detect)
	t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v max %v; deadline→detected p50 %v p99 %v",
		len(late), percentile(late, .5), percentile(late, .99), late[len(late)-1], percentile(detect, .5), percentile(detect, .99))
}
