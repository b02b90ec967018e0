package ingest

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// preparedAllocs is how many allocations preparing and routing a batch of
// n heartbeats (values made by value) costs once the processor's buffers
// have grown.
func preparedAllocs(t *testing.T, n int, value func(k int) string) float64 {
	t.Helper()
	kc := kafkaconn.DefaultConfig()
	kc.DeadLetterTopic = ""
	in, err := New(DefaultConfig(), Options{Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Kafka: kc,
		Metrics: metrics.New(metrics.Options{}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	p := newProcessors(in, 1)[0]
	now := time.Now()
	rs := make([]kfetch.Record, n)
	for k := range rs {
		rs[k] = kfetch.Record{Offset: int64(k), Time: now, Key: []byte(fmt.Sprintf("dev-%d", k)),
			Value: []byte(value(k))}
	}
	chunks := []chunk{{partition: 0, msgs: rs, next: int64(n), sentMs: now.UnixMilli()}}
	order := make([]uint16, n)
	l := shard.Layout{Count: 16}
	run := func() {
		p.prepare(chunks, order)
		p.route(l)
		p.recordKin() // as finish does once the batch is written
	}
	run()
	return testing.AllocsPerRun(20, run)
}

// A batch of heartbeats naming no parent prepares and routes with one
// allocation per device, its id, as before parents existed (500 per batch
// of 500 at c0abd3f): parents cost a fleet without them nothing on the hot
// path. Children repeating the parent already written cost no more than
// the copy of a parent id differing from the record before's, which the
// decoder makes (decode.Heartbeat keeps its strings).
func TestParentsCostTheHotPathNoAllocation(t *testing.T) { // not parallel: AllocsPerRun
	ts := time.Now().UnixMilli()
	const n = 500
	if got := preparedAllocs(t, n, func(int) string { return fmt.Sprintf(`{"ts":%d}`, ts) }); got > n {
		t.Errorf("%v allocations per batch of %d without parents, want at most %d", got, n, n)
	}
	if got := preparedAllocs(t, n, func(k int) string { return fmt.Sprintf(`{"ts":%d,"parent":"gw-%d"}`, ts, k/100) }); got > n+5 {
		t.Errorf("%v allocations per batch of %d children of 5 gateways repeating their parents, want at most %d", got, n, n+5)
	}
}
