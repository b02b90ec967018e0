package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
)

// A reset that lands between a scan and its removal is never lost: the
// scanner's removal is conditional on the score it read. The interleaving
// is forced with the scanner's BeforeRemove hook.
func TestResetBetweenScanAndRemovalIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, 4)
	const id = "racer"
	i := shard.Of(shard.Hash(id), 4)
	reset := shard.Score(time.Now().Add(time.Hour).UnixMilli(), 0)
	var inst *e2etest.Instance
	interleaved := make(chan []shard.Member, 1)
	hooks := app.Hooks{Scanner: scanner.Hooks{
		BeforeRemove: func(s int, batch []shard.Member) {
			// The heartbeat "arrives" now: after Kafka acknowledged the
			// timeout, before the scanner removes the member.
			var b shard.Batch
			b.Reset(4)
			b.Add(s, id, reset, 0)
			if _, err := inst.Store.Write(context.Background(), &b); err != nil {
				t.Errorf("reset: %v", err)
			}
			interleaved <- batch
		},
	}}
	inst = e2etest.Start(t, e.Cfg, hooks)
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 2)

	e2etest.Produce(t, e.Kafka.Brokers(), e2etest.Signals, kafka.Message{Key: []byte(id), Value: []byte(`{}`), Time: time.Now()})
	var batch []shard.Member
	select {
	case batch = <-interleaved:
	case <-time.After(30 * time.Second):
		t.Fatal("the device never timed out")
	}
	if len(batch) != 1 || batch[0].ID != id {
		t.Fatalf("fired batch %v", batch)
	}
	// The timeout itself was legitimately published once, and the reset
	// that raced it is the device coming back: one recovered event, found
	// by the scanner (the reset ran before any down entry existed).
	timeout, ok := events.Next(10 * time.Second)
	if !ok {
		t.Fatal("timeout event not published")
	}
	if timeout.Ev.DeviceID != id || timeout.Ev.Type != "timeout" {
		t.Fatalf("unexpected event %+v", timeout.Ev)
	}
	resetDeadline, _ := shard.DecodeScore(reset)
	r, ok := events.Next(10 * time.Second)
	if !ok {
		t.Fatal("no recovered event for the reset that raced the timeout")
	}
	if ev := r.Ev; ev.DeviceID != id || ev.Type != "recovered" || ev.DownSinceMs != timeout.Ev.DeadlineMs ||
		ev.SeenAtMs != resetDeadline-e.Cfg.Timeouts.Default.Milliseconds() {
		t.Fatalf("recovered event %+v; want down since %d, seen at %d", ev, timeout.Ev.DeadlineMs, resetDeadline-e.Cfg.Timeouts.Default.Milliseconds())
	}
	// The recovery is published once the removal ran: the member it kept
	// holds the reset.
	score, ok, err := inst.Store.Score(context.Background(), i, id)
	if err != nil || !ok || score != reset {
		t.Fatalf("reset lost: score %v tracked %v err %v, want %v", score, ok, err, reset)
	}
	if _, down, err := inst.Store.DownScore(context.Background(), i, id); err != nil || down {
		t.Fatalf("the device is remembered as down (%v, %v) after its recovery was reported", down, err)
	}
}
