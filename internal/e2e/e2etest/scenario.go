package e2etest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
)

// Scenario is the shape of a fleet test: how many devices beat how often,
// how many of them go silent, the timeout they all have, and how many
// partitions each topic and how many shards the layout has. A field left
// zero takes its value from Defaults.
type Scenario struct {
	Devices    int
	Silent     int
	Interval   time.Duration // between two rounds of the fleet
	Timeout    time.Duration // timeouts.default
	Partitions int           // of each topic
	Shards     int           // shards.initial_count

	// RedisArgs go to the private redis-server and KafkaOpts to the
	// in-process Kafka that Start starts.
	RedisArgs []string
	KafkaOpts []kfake.Opt
}

// Defaults are the core rhythm of the tests, a heartbeat every 200 ms and a 1 s
// timeout, for 1,000 devices of which 100 go silent, on 4 partitions and 8
// shards.
var Defaults = Scenario{
	Devices:    1000,
	Silent:     100,
	Interval:   200 * time.Millisecond,
	Timeout:    time.Second,
	Partitions: 4,
	Shards:     8,
}

// Filled is s with every zero field set from Defaults.
func (s Scenario) Filled() Scenario {
	d := Defaults
	s.Devices = cmp.Or(s.Devices, d.Devices)
	s.Silent = cmp.Or(s.Silent, d.Silent)
	s.Interval = cmp.Or(s.Interval, d.Interval)
	s.Timeout = cmp.Or(s.Timeout, d.Timeout)
	s.Partitions = cmp.Or(s.Partitions, d.Partitions)
	s.Shards = cmp.Or(s.Shards, d.Shards)
	return s
}

// Want is what the verdict expects of the scenario's timeouts, with
// delivery d.
func (s Scenario) Want(d Delivery) Want {
	s = s.Filled()
	return Want{Timeout: s.Timeout, Shards: s.Shards, Delivery: d}
}

// Schedule picks the scenario's silent devices to go silent at random
// moments within [from, to) (SilentSchedule).
func (s Scenario) Schedule(rng *rand.Rand, from, to time.Time) []time.Time {
	s = s.Filled()
	return SilentSchedule(rng, s.Devices, s.Silent, from, to)
}

// Every makes the scenario's silent devices, evenly spread, go silent
// together at at (SilentEvery).
func (s Scenario) Every(at time.Time) []time.Time {
	s = s.Filled()
	return SilentEvery(s.Devices, s.Silent, at)
}

// Run is a scenario running: its environment, one in-process instance
// configured for it, the collector of the timeouts topic and, once
// started, the fleet.
type Run struct {
	Scenario // filled
	*Env
	Inst   *Instance
	Events *Collector
	Fleet  *Fleet
}

// Start starts the scenario's environment (a private redis-server with
// RedisArgs and an in-process Kafka with KafkaOpts) and runs it there (see
// StartOn).
func (s Scenario) Start(t testing.TB, configure func(*configs.Config)) *Run {
	t.Helper()
	s = s.Filled()
	e := &Env{Redis: testenv.Redis(t, s.RedisArgs...), Kafka: testenv.KafkaWith(t, s.KafkaOpts, s.Partitions, Topics...)}
	e.Cfg = Config(t, []string{e.Redis.Addr()}, e.Kafka.Brokers())
	return s.StartOn(t, e, configure)
}

// StartOnRedis starts an in-process Kafka for a Redis topology of the
// test's own at redisAddrs (a cluster, Sentinels) and runs the scenario
// there (see StartOn); Run.Redis is nil.
func (s Scenario) StartOnRedis(t testing.TB, redisAddrs []string, configure func(*configs.Config)) *Run {
	t.Helper()
	s = s.Filled()
	e := &Env{Kafka: testenv.Kafka(t, s.Partitions, Topics...)}
	e.Cfg = Config(t, redisAddrs, e.Kafka.Brokers())
	return s.StartOn(t, e, configure)
}

// StartOn runs the scenario on e: e.Cfg gets the scenario's timeout and
// shard count, then configure (if not nil) changes what else the test
// needs; an instance starts on that configuration, which Run.Cfg keeps,
// and a collector reads the timeouts topic.
func (s Scenario) StartOn(t testing.TB, e *Env, configure func(*configs.Config)) *Run {
	t.Helper()
	s = s.Filled()
	e.Cfg.Timeouts.Default = s.Timeout
	e.Cfg.Shards.InitialCount = s.Shards
	if configure != nil {
		configure(&e.Cfg)
	}
	return &Run{
		Scenario: s,
		Env:      e,
		Inst:     Start(t, e.Cfg, app.Hooks{}),
		Events:   Collect(t, e.Kafka.Brokers(), Timeouts, s.Partitions),
	}
}

// StartFleet starts the scenario's devices, named prefix00000 on, beating
// into the signals topic; silentAt is when each goes silent (Schedule,
// Every).
func (r *Run) StartFleet(t testing.TB, prefix string, silentAt []time.Time) *Fleet {
	t.Helper()
	return r.StartFleetWith(t, nil, prefix, silentAt)
}

// StartFleetWith is StartFleet with the producer's options opts
// (StartFleetWith of the package).
func (r *Run) StartFleetWith(t testing.TB, opts []kgo.Opt, prefix string, silentAt []time.Time) *Fleet {
	t.Helper()
	r.Fleet = StartFleetWith(t, r.Kafka.Brokers(), opts, IDs(prefix, r.Devices), r.Interval, silentAt)
	return r.Fleet
}

// StartShapedFleet is StartFleetWith writing the heartbeats in shape.
func (r *Run) StartShapedFleet(t testing.TB, opts []kgo.Opt, shape Shape, prefix string, silentAt []time.Time) *Fleet {
	t.Helper()
	r.Fleet = StartShapedFleet(t, r.Kafka.Brokers(), opts, shape, IDs(prefix, r.Devices), r.Interval, silentAt)
	return r.Fleet
}

// Finish is Fleet.Finish for the run's fleet, events and instance: it
// waits up to wait for every silent device's timeout and returns the
// verdict, which expects delivery d.
func (r *Run) Finish(t testing.TB, wait time.Duration, d Delivery) Verdict {
	t.Helper()
	return r.Fleet.Finish(t, r.Events, wait, r.Want(d), r.Inst)
}

// Rescale scales inst's layout from from to to shards and waits up to
// wait until the migration finalized by itself; `shards status` must have
// shown it in progress on the way. It returns the layout the scale
// started.
func Rescale(t testing.TB, inst *Instance, from, to int, wait time.Duration) shard.Layout {
	t.Helper()
	ctx := context.Background()
	l, err := rebalance.Scale(ctx, inst.Store, to, time.Now())
	if err != nil {
		t.Fatalf("scale to %d: %v", to, err)
	}
	sawProgress := false
	EventuallyNil(t, wait, fmt.Sprintf("%d→%d to finalize", from, to), func() error {
		st, err := inspect.ReadStatus(ctx, inst.Store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if st.Migration.Active {
			sawProgress = sawProgress || st.Migration.Moved > 0 || st.Migration.Misplaced > 0
		} else if st.Layout.Count == to && st.Layout.Previous == 0 && st.Layout.Epoch > l.Epoch {
			return nil
		}
		return fmt.Errorf("layout %+v migration %+v", st.Layout, st.Migration)
	})
	t.Logf("%d→%d finalized after %v (status showed progress: %v)", from, to, time.Since(time.UnixMilli(l.SinceMs)).Round(time.Millisecond), sawProgress)
	if !sawProgress {
		t.Errorf("shards status never showed the %d→%d migration in progress", from, to)
	}
	return l
}
