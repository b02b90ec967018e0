package scanner_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// newStore returns a store over a private redis-server with its scripts
// loaded, and the server's client.
func newStore(tb testing.TB) (*shard.Store, *redis.Client) {
	tb.Helper()
	store, srv := testenv.Store(tb)
	return store, srv.Client(tb)
}

// runScanner starts a scanner over shards with a real publisher to brokers,
// every deadline up to now already behind the watermark. It returns the
// ids of the members that fired, in the order their groups completed, and
// the metrics; the scanner stops when the test ends.
func runScanner(t *testing.T, store *shard.Store, layout scanner.LayoutSource, brokers []string, shards []int) (<-chan string, *metrics.Metrics) {
	t.Helper()
	sc, m := startScanner(t, store, brokers, scannerSetup{watermark: time.Now(), layout: layout, shards: shards, fired: true})
	return sc.TestSignals.Fired.C(), m
}

// scannerSetup is what startScanner wires beyond a real publisher, a gate
// and fresh metrics.
type scannerSetup struct {
	// watermark is where the watermark of the single partition stands:
	// nothing due after it fires.
	watermark time.Time
	layout    scanner.LayoutSource
	shards    []int
	// gateways, when set, turns the gateway step on, timed by the
	// publisher.
	gateways *scanner.GatewaysConfig
	// fired makes the scanner signal the ids of the members that fired
	// (Scanner.TestSignals), which the test must then read.
	fired bool
}

// startScanner starts a scanner over store publishing to brokers, as s
// says; it stops, its batches in flight drained, when the test ends.
func startScanner(t *testing.T, store *shard.Store, brokers []string, s scannerSetup) (*scanner.Scanner, *metrics.Metrics) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	if err := store.RaiseWatermarks(ctx, 1, map[int]int64{0: s.watermark.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{})
	kc := kafkaconn.DefaultConfig()
	kc.Brokers = brokers
	pub, err := dispatch.New(dispatch.DefaultConfig(), kc, dispatch.Options{Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Metrics: m, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	gate := scanner.NewGate(scanner.GateOptions{Store: store, Poll: 5 * time.Millisecond, StallAfter: time.Minute, Log: log})
	if err := gate.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	opts := scanner.Options{Store: store, Dispatcher: pub, Gate: gate, Layout: s.layout, Metrics: m, Log: log}
	if s.gateways != nil {
		opts.Timing, opts.Gateways = pub.Timing, s.gateways
	}
	sc, err := scanner.New(scanner.DefaultConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.fired {
		sc.TestSignals.Init(t)
	}
	if err := sc.SetShards(s.shards); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sc.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done // Run returned: its batches in flight are drained
		_ = pub.Close()
	})
	return sc, m
}
