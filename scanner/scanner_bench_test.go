package scanner_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// countingDispatcher acknowledges every batch at once, as a Kafka that
// never waits would: what is left is the scanner's own cost and Redis's.
type countingDispatcher struct{ n atomic.Int64 }

func (d *countingDispatcher) Timeouts(_ context.Context, _ int, due []shard.Member, _ map[string]int64, _ time.Time) error {
	d.n.Add(int64(len(due)))
	return nil
}

func (d *countingDispatcher) Raced(context.Context, int, []shard.Raced, map[string]int64) error {
	return nil
}

func (d *countingDispatcher) Noted(_ context.Context, _ int, due []shard.Member, _ map[string]int64, _ map[string]timeouts.Note, _ time.Time) error {
	d.n.Add(int64(len(due)))
	return nil
}

type fixedLayout struct{ l shard.Layout }

func (f fixedLayout) Current() shard.Layout { return f.l }

// BenchmarkDrain is scanner passes draining one shard of 2,000 due members
// (100 batches of scanner.batch_size 20) through an instant dispatcher,
// each member removed by the conditional fired script: the scanner's side
// of mass expiry, per shard. One op = one shard drained.
//
//	go test -run '^$' -bench Drain -benchmem -count 6 ./scanner
func BenchmarkDrain(b *testing.B) {
	const due = 2000
	st, _ := newStore(b)
	ctx := context.Background()
	// Every partition's watermark far ahead: nothing holds firing back.
	if err := st.RaiseWatermarks(ctx, 1, map[int]int64{0: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	gate := scanner.NewGate(scanner.GateOptions{Store: st, Poll: time.Second, StallAfter: time.Hour, Log: log})
	if err := gate.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	disp := &countingDispatcher{}
	cfg := scanner.DefaultConfig()
	cfg.Interval = time.Hour // passes run only when woken: one op = one drain
	sc, err := scanner.New(cfg, scanner.Options{
		Store: st, Dispatcher: disp, Gate: gate, Metrics: metrics.New(metrics.Options{}), Log: log,
		Layout: fixedLayout{shard.Layout{Count: 1}}, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = sc.Run(runCtx) }()
	defer func() {
		stop()
		<-ran
	}()
	if err := sc.SetShards([]int{0}); err != nil {
		b.Fatal(err)
	}

	var batch shard.Batch
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		batch.Reset(1)
		deadline := time.Now().Add(-time.Second).UnixMilli()
		for k := 0; k < due; k++ {
			batch.Add(0, fmt.Sprintf("r%d-device-%05d", round, k), shard.Score(deadline, 0), 0)
		}
		if _, err := st.Write(ctx, &batch); err != nil {
			b.Fatal(err)
		}
		want := disp.n.Load() + due
		b.StartTimer()
		sc.Wake(0)
		for {
			if disp.n.Load() >= want {
				n, err := st.Sizes(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				if n[0] == 0 {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.ReportMetric(float64(b.N*due)/b.Elapsed().Seconds(), "members/s")
}
