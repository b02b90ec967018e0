package faults_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// outageScenario is the load of the Redis and the Kafka outage tests: 1,000
// devices beating every 500 ms with a 3 s timeout, 100 of them going silent
// before, during and after the outage, on 4 partitions and 8 shards.
var outageScenario = e2etest.Scenario{
	Devices:    1000,
	Silent:     100,
	Interval:   500 * time.Millisecond,
	Timeout:    3 * time.Second,
	Partitions: 4,
	Shards:     8,
}

// metadataRefreshing are a fleet producer's options to refresh its
// metadata every 100 ms, so that it follows a leader move or a new
// partition count within moments.
var metadataRefreshing = []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(100 * time.Millisecond)}

// seed returns the random seed of a test: FLATLINE_FAULTS_SEED when set (to
// replay a failure), else a fresh one. It is logged either way.
func seed(t *testing.T) *rand.Rand {
	t.Helper()
	s := rand.Uint64()
	if v := os.Getenv("FLATLINE_FAULTS_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("FLATLINE_FAULTS_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with FLATLINE_FAULTS_SEED=%d)", s, s)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// pollEvery calls fn every period on a goroutine of its own until the
// returned stop is called or the test ends; stop returns once fn has.
func pollEvery(t *testing.T, period time.Duration, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			fn(ctx)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}
