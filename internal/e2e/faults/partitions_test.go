package faults_test

import (
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestPartitionsAdded grows the signals topic from 4 to 16 partitions
// while 2,000 devices beat every 200 ms with a 1 s timeout. The fleet's
// producer keys like any Kafka client (murmur2 over the partition count)
// and refreshes its metadata every 100 ms, so about three in four devices
// move to a new partition within moments of the change: their heartbeats
// then sit in partitions nobody reads yet. Firing must not pass them (docs/
// operations.md, "Adding partitions"): no live device times out, every silence is
// reported, and every new partition is consumed (a committed offset)
// within 5 s of its creation.
func TestPartitionsAdded(t *testing.T) {
	t.Parallel()
	const before, after = 4, 16
	rng := seed(t)
	// 2,000 devices, 100 silent, every 200 ms with a 1 s timeout, 8 shards.
	run := e2etest.Scenario{Devices: 2000, Partitions: before}.Start(t, func(cfg *configs.Config) {
		cfg.Kafka.SessionTimeout = 2 * time.Second
	})
	k, cfg, inst, devices := run.Kafka, run.Cfg, run.Inst, run.Devices

	start := time.Now()
	grow := start.Add(3 * time.Second)
	f := run.StartFleetWith(t, metadataRefreshing, "p-", run.Schedule(rng, start.Add(1500*time.Millisecond), grow.Add(5*time.Second)))
	ids := f.IDs

	moved := 0
	parts := func(n int) []int {
		ps := make([]int, n)
		for p := range ps {
			ps[p] = p
		}
		return ps
	}
	bal := &kafka.Murmur2Balancer{}
	for _, id := range ids {
		m := kafka.Message{Key: []byte(id)}
		if bal.Balance(m, parts(before)...) != bal.Balance(m, parts(after)...) {
			moved++
		}
	}

	e2etest.Eventually(t, 10*time.Second, "every device tracked", func() bool {
		return f.Rounds() >= 3 && testenv.CaughtUp(t, k.Brokers(), cfg.Kafka.GroupID, e2etest.Signals, before)
	})
	time.Sleep(time.Until(grow))
	testenv.AddPartitions(t, k.Brokers(), e2etest.Signals, after)
	grown := time.Now()
	t.Logf("signals topic grown from %d to %d partitions at +%v: %d of %d devices' keys move",
		before, after, grown.Sub(start).Round(time.Millisecond), moved, devices)

	// Every new partition gets heartbeats from the moved devices; each is
	// consumed once the group committed an offset for it.
	took := e2etest.Eventually(t, 15*time.Second, "every new partition consumed", func() bool {
		got := testenv.Committed(t, k.Brokers(), cfg.Kafka.GroupID, e2etest.Signals, after)
		return !slices.ContainsFunc(parts(after)[before:], func(p int) bool { return got[p] <= 0 })
	})
	if took > 5*time.Second {
		t.Errorf("the new partitions were consumed %v after their creation, want within 5s", took.Round(time.Millisecond))
	}
	if n := inst.Log.Count("partition count changed"); n == 0 {
		t.Errorf("flatline never noticed the new partitions itself (no \"partition count changed\" line)")
	}

	v := run.Finish(t, 20*time.Second, e2etest.ExactlyOnce)
	t.Logf("new partitions consumed %v after their creation; %v; lateness %s", took.Round(time.Millisecond), v, e2etest.Spread(v.Late))
}
