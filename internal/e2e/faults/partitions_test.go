package faults_test

import (
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestPartitionsAdded grows the signals topic from 4 to 16 partitions
// while 2,000 devices beat every 200 ms with a 1 s timeout. The fleet's
// producer keys like any Kafka client (murmur2 over the partition count)
// and refreshes its metadata every 100 ms, so about three in four devices
// move to a new partition within moments of the change: their heartbeats
// then sit in partitions nobody reads yet. Firing must not pass them (SPEC
// §7 "Partitions added"): no live device times out, every silence is
// reported, and every new partition is consumed (a committed offset)
// within 5 s of its creation.
func TestPartitionsAdded(t *testing.T) {
	t.Parallel()
	const (
		devices  = 2000
		silent   = 100
		interval = 200 * time.Millisecond
		timeout  = time.Second
		before   = 4
		after    = 16
		shards   = 8
	)
	rng := seed(t)
	e := e2etest.NewEnv(t, before)
	k, cfg := e.Kafka, e.Cfg
	cfg.Kafka.SessionTimeout = 2 * time.Second
	cfg.Timeouts.Default = timeout
	cfg.Shards.InitialCount = shards
	inst := e2etest.Start(t, cfg, app.Hooks{})

	start := time.Now()
	grow := start.Add(3 * time.Second)
	w := e2etest.NewWriter(k.Brokers(), e2etest.Signals)
	w.Transport = &kafka.Transport{MetadataTTL: 100 * time.Millisecond}
	ids := e2etest.IDs("p-", devices)
	f := e2etest.StartFleetOn(t, w, ids, interval,
		e2etest.SilentSchedule(rng, devices, silent, start.Add(1500*time.Millisecond), grow.Add(5*time.Second)))
	events := e2etest.Collect(t, k.Brokers(), e2etest.Timeouts, before)

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

	v := f.Finish(t, events, 20*time.Second, e2etest.Want{Timeout: timeout, Shards: shards}, inst)
	slices.Sort(v.Late)
	t.Logf("new partitions consumed %v after their creation; %v; lateness p50 %v p99 %v max %v",
		took.Round(time.Millisecond), v, e2etest.Percentile(v.Late, 0.5).Round(time.Millisecond),
		e2etest.Percentile(v.Late, 0.99).Round(time.Millisecond), e2etest.Percentile(v.Late, 1).Round(time.Millisecond))
}
