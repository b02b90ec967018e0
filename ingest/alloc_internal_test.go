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

// preparer runs a processor's prepare, route and record of batches, as
// finish does once a batch is written.
type preparer struct {
	p     *processor
	now   time.Time
	order []uint16
}

func newPreparer(tb testing.TB) *preparer {
	tb.Helper()
	kc := kafkaconn.DefaultConfig()
	kc.DeadLetterTopic = ""
	in, err := New(DefaultConfig(), Options{Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Kafka: kc,
		Metrics: metrics.New(metrics.Options{}), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return &preparer{p: newProcessors(in, 1)[0], now: time.Now()}
}

// chunk is a batch of n heartbeats of devices dev-<first+k>, their values
// made by value.
func (pr *preparer) chunk(first, n int, value func(k int) string) []chunk {
	rs := make([]kfetch.Record, n)
	for k := range rs {
		rs[k] = kfetch.Record{Offset: int64(k), Time: pr.now, Key: []byte(fmt.Sprintf("dev-%d", first+k)),
			Value: []byte(value(first + k))}
	}
	return []chunk{{partition: 0, msgs: rs, next: int64(n), sentMs: pr.now.UnixMilli()}}
}

func (pr *preparer) run(chunks []chunk) {
	n := len(chunks[0].msgs)
	if len(pr.order) != n {
		pr.order = make([]uint16, n)
	}
	pr.p.prepare(chunks, pr.order)
	pr.p.route(shard.Layout{Count: 16})
	pr.p.recordKin()
}

// preparedAllocs is how many allocations preparing and routing a batch of
// n heartbeats (values made by value) costs once the processor's buffers
// have grown.
func preparedAllocs(t *testing.T, n int, value func(k int) string) float64 {
	t.Helper()
	pr := newPreparer(t)
	c := pr.chunk(0, n, value)
	run := func() { pr.run(c) }
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
