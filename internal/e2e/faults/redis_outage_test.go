package faults_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestRedisOutage stops redis-server for 10 s under load and starts it
// again on the same port. The server runs with --appendonly yes
// --appendfsync always, so every acknowledged write survives the stop (the
// persistence mode this test chooses; a promoted replica would do as well).
//
// While Redis is down ingest pauses without committing any offset,
// scanners fail at most once per shard per tick (no hot loop), /readyz
// answers 503 and the process keeps running. Afterwards /readyz is 200
// again, every silent device gets its timeout for its last heartbeat, even
// one sent during the outage, and no live device gets one.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const outage = 10 * time.Second
	rng := seed(t)
	sc := outageScenario
	sc.RedisArgs = []string{"--appendonly", "yes", "--appendfsync", "always"}
	run := sc.Start(t, func(cfg *configs.Config) {
		cfg.Kafka.SessionTimeout = 2 * time.Second
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.Scanner.LeaseTTL = 2 * time.Second
	})
	rs, k, cfg, inst := run.Redis, run.Kafka, run.Cfg, run.Inst
	partitions, shards := run.Partitions, run.Shards
	readyz := "http://" + inst.HTTP.Addr() + "/readyz"
	e2etest.Eventually(t, 10*time.Second, "/readyz 200 at start", func() bool { return e2etest.HTTPStatus(readyz) == 200 })

	// Silences spread so that deadlines fall before, during and after the
	// outage.
	start := time.Now()
	down := start.Add(4 * time.Second)
	up := down.Add(outage)
	run.StartFleet(t, "r-", run.Schedule(rng, start.Add(1500*time.Millisecond), up.Add(2*time.Second)))

	time.Sleep(time.Until(down))
	m := inst.Metrics
	ingestErrs0, scanErrs0 := testutil.ToFloat64(m.IngestErrors), testutil.ToFloat64(m.ScanErrors)
	rs.Stop()
	t.Logf("redis-server stopped at +%v", time.Since(start).Round(time.Millisecond))

	// Once ingest has failed a write, every batch before it is committed
	// and nothing more may be until Redis is back.
	e2etest.Eventually(t, 5*time.Second, "ingest to fail a write", func() bool {
		return testutil.ToFloat64(m.IngestErrors) > ingestErrs0
	})
	before := testenv.Committed(t, k.Brokers(), cfg.Kafka.GroupID, e2etest.Signals, partitions)
	// /readyz is sampled every 200 ms for the rest of the outage.
	statuses := map[int]int{}
	for time.Now().Before(up) {
		statuses[e2etest.HTTPStatus(readyz)]++
		if inst.Exited() {
			t.Fatalf("flatline exited during the Redis outage: %v", inst.Err())
		}
		time.Sleep(200 * time.Millisecond)
	}
	after := testenv.Committed(t, k.Brokers(), cfg.Kafka.GroupID, e2etest.Signals, partitions)
	end := testenv.EndOffsets(t, k.Brokers(), e2etest.Signals, partitions)
	pending := int64(0)
	for p := range after {
		if after[p] != before[p] {
			t.Errorf("partition %d: offset committed from %d to %d while Redis was down", p, before[p], after[p])
		}
		pending += end[p] - after[p]
	}
	if pending == 0 {
		t.Error("no heartbeat arrived during the outage: the test proves nothing")
	}
	ingestErrs := testutil.ToFloat64(m.IngestErrors) - ingestErrs0
	scanErrs := testutil.ToFloat64(m.ScanErrors) - scanErrs0
	if statuses[503] == 0 || statuses[200] > 0 {
		t.Errorf("/readyz during the outage answered %v, want only 503", statuses)
	}
	// Back-off: ingest retries with a doubling delay (capped at 1s), the
	// scanners at most once per shard per tick.
	if maxIngest := 3 * outage.Seconds(); ingestErrs > maxIngest {
		t.Errorf("ingest failed %v writes in %v: not backing off", ingestErrs, outage)
	}
	if maxScan := float64(shards) * float64(outage/cfg.Scanner.Interval) * 1.5; scanErrs > maxScan {
		t.Errorf("scanners failed %v passes in %v (more than one per shard per %v tick)", scanErrs, outage, cfg.Scanner.Interval)
	}

	restart := time.Now()
	rs.Start()
	e2etest.Eventually(t, 15*time.Second, "/readyz 200 after Redis came back", func() bool { return e2etest.HTTPStatus(readyz) == 200 })
	readyAfter := time.Since(restart)

	v := run.Finish(t, 30*time.Second, e2etest.ExactlyOnce)
	caught := v.AllFired.Sub(restart)
	t.Logf("fleet: %d rounds, max heartbeat→next-ack %v; ", v.Rounds, v.MaxLag.Round(time.Millisecond))
	t.Logf("outage %v: %d heartbeats held uncommitted; /readyz %v; %v failed ingest writes, %v failed scanner passes; "+
		"/readyz 200 %v after restart, all silent devices fired %v after restart; %v",
		outage, pending, statuses, ingestErrs, scanErrs, readyAfter.Round(time.Millisecond), caught.Round(time.Millisecond), v)
}
