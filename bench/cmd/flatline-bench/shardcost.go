package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// ShardCostResult is the shard-cost scenario: the same fleet on one
// instance with few shards and then with many, one after the other, each on
// fresh servers. What the many shards cost beyond the few is the fixed cost
// of a shard, which decides how far flatline scales by adding shards; the
// targets bound it (flatline and redis-server CPU each ≤ 1.5×, detection
// lateness p99 ≤ 2×).
type ShardCostResult struct {
	Devices int `json:"devices"`
	// The fleet beats every second with FleetTimeoutMs (none of it fires);
	// SilentPerSecond devices of their own send one heartbeat each with
	// timeout_ms SilentTimeoutMs and go silent: their timeouts are the
	// lateness sample.
	FleetTimeoutMs  int64   `json:"fleet_timeout_ms"`
	SilentPerSecond int     `json:"silent_per_second"`
	SilentTimeoutMs int64   `json:"silent_timeout_ms"`
	WindowSeconds   float64 `json:"window_seconds"`
	// Runs holds one run per shard count, in the order run: the first is
	// the base of the ratios, the last their subject.
	Runs []ShardCostRun `json:"runs"`
	// The last run's figure over the first's.
	RatioFlatlineCPU float64 `json:"ratio_flatline_cpu"`
	RatioRedisCPU    float64 `json:"ratio_redis_cpu"`
	RatioCommands    float64 `json:"ratio_redis_commands"`
	RatioLatenessP99 float64 `json:"ratio_lateness_p99"`
}

// ShardCostRun is one shard count's measurement over the window.
type ShardCostRun struct {
	Shards int `json:"shards"`
	// FlatlineCores and RedisCores are each process's CPU seconds over the
	// window's wall seconds.
	FlatlineCores float64 `json:"flatline_cores"`
	RedisCores    float64 `json:"redis_cores"`
	// CommandsPerSecond is INFO stats total_commands_processed's growth
	// over the window (the bench's own INFO calls included: a few).
	CommandsPerSecond float64 `json:"redis_commands_per_second"`
	// Goroutines is flatline's go_goroutines at the window's end.
	Goroutines    float64 `json:"goroutines"`
	HeartbeatsIn  float64 `json:"heartbeats_consumed_per_second"`
	Silent        int     `json:"silent_sent"`
	Received      int     `json:"silent_timeouts_received"`
	FleetTimeouts int     `json:"fleet_timeouts"`
	// Arrivals are the silent devices' timeouts at the test consumer.
	Arrivals
	Cost
}

// The scenario's targets (docs/performance.md, "Targets").
const (
	shardCostCPUTarget      = 1.5
	shardCostLatenessTarget = 2.0
)

// runShardCost runs the fleet once per shard count of -cost-shards.
func runShardCost(ctx context.Context, o *options) (*ShardCostResult, error) {
	var counts []int
	for _, f := range strings.Split(o.costShards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-cost-shards %q: want shard counts like 16,4096", o.costShards)
		}
		counts = append(counts, n)
	}
	if len(counts) < 2 {
		return nil, fmt.Errorf("-cost-shards %q: want at least two shard counts to compare", o.costShards)
	}
	res := &ShardCostResult{Devices: o.costDevices, FleetTimeoutMs: costFleetTimeout.Milliseconds(),
		SilentPerSecond: o.costSilent, SilentTimeoutMs: costSilentTimeout.Milliseconds(), WindowSeconds: o.costWindow.Seconds()}
	for _, n := range counts {
		run, err := runShardCostOnce(ctx, o, n)
		if err != nil {
			return nil, fmt.Errorf("%d shards: %w", n, err)
		}
		status("shard-cost: %d shards: flatline %.3f cores, redis %.3f cores, %.0f commands/s, %.0f goroutines, lateness p99 %.1f ms (%d/%d)",
			n, run.FlatlineCores, run.RedisCores, run.CommandsPerSecond, run.Goroutines, run.Lateness.P99, run.Received, run.Silent)
		res.Runs = append(res.Runs, *run)
	}
	base, last := res.Runs[0], res.Runs[len(res.Runs)-1]
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	res.RatioFlatlineCPU = ratio(last.FlatlineCores, base.FlatlineCores)
	res.RatioRedisCPU = ratio(last.RedisCores, base.RedisCores)
	res.RatioCommands = ratio(last.CommandsPerSecond, base.CommandsPerSecond)
	res.RatioLatenessP99 = ratio(last.Lateness.P99, base.Lateness.P99)
	return res, nil
}

// The fleet's timeout leaves room for a late beat, so the fleet never
// fires; the silent devices' is timeouts.min's default, so their deadline
// falls due before a scanner.interval (1 s) poll would see it: the wake-ups
// of writes are what makes them fire on time.
const (
	costFleetTimeout  = 3 * time.Second
	costSilentTimeout = time.Second
	costSettle        = 5 * time.Second // fleet tracked, ingest settled, before the window
)

func runShardCostOnce(ctx context.Context, o *options, shards int) (*ShardCostRun, error) {
	oo := *o
	oo.shards = shards
	infra, err := startInfra(ctx, &oo)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	kc, brokers, rp := infra.kc, infra.brokers, infra.rp
	run := &ShardCostRun{Shards: shards}
	run.Profile = o.profilePath(fmt.Sprintf("shard-cost-%d", shards))
	fl, err := infra.serve(ctx, &oo, map[string]string{"timeouts.default": costFleetTimeout.String()}, run.Profile)
	if err != nil {
		return nil, err
	}
	defer fl.Stop(15 * time.Second)

	tally := newArrivalTally("silent-")
	cons, err := startConsumer(brokers, kc.TimeoutsTopic, tally.add)
	if err != nil {
		return nil, err
	}
	defer cons.Stop()

	status("shard-cost: %d shards: %d devices beating every second (timeout %s)", shards, o.costDevices, costFleetTimeout)
	fleet, err := startRateProducer(brokers, kc.SignalsTopic, sample.DeviceIDs("cost-", o.costDevices), o.costDevices)
	if err != nil {
		return nil, err
	}
	defer fleet.Stop()
	time.Sleep(costSettle)

	m0, _ := fl.Metrics(ctx)
	cmds0, _ := rp.TotalCommands(ctx)
	top0, _ := rp.CommandStats(ctx)
	meter := newCPUMeter(map[string]int{"flatline": fl.PID, "redis": rp.PID, "bench+kfake": selfPID()})
	status("shard-cost: %d shards: %d devices a second going silent (timeout %s), for %s", shards, o.costSilent, costSilentTimeout, o.costWindow)
	sent, err := sendSilent(ctx, brokers, kc.SignalsTopic, o.costSilent, o.costWindow)
	if err != nil {
		return nil, err
	}
	run.CPUSplit = meter.Split()
	cmds1, err := rp.TotalCommands(ctx)
	if err == nil && cmds0 > 0 {
		run.CommandsPerSecond = float64(cmds1-cmds0) / run.CPUSplit["wall"]
	}
	if top1, err := rp.CommandStats(ctx); err == nil {
		run.RedisTop = topCommands(top0, top1, 5)
	}
	if wall := run.CPUSplit["wall"]; wall > 0 {
		run.FlatlineCores = run.CPUSplit["flatline"] / wall
		run.RedisCores = run.CPUSplit["redis"] / wall
	}
	if m1, err := fl.Metrics(ctx); err == nil {
		run.Goroutines = sumMetric(m1, "go_goroutines")
		if m0 != nil {
			run.HeartbeatsIn = (sumMetric(m1, "flatline_heartbeats_consumed_total") - sumMetric(m0, "flatline_heartbeats_consumed_total")) / run.CPUSplit["wall"]
		}
	}
	run.Silent = sent

	// The last silent devices fire a timeout after the window.
	end := time.Now().Add(costSilentTimeout + 10*time.Second)
	for {
		if tally.received() >= sent || time.Now().After(end) {
			break
		}
		if exited, err := fl.Exited(); exited {
			return nil, fmt.Errorf("flatline exited: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run.Received, run.Arrivals, run.FleetTimeouts = tally.result()
	return run, nil
}

// sendSilent sends, for window, perSecond heartbeats a second, each of a
// device of its own that never beats again, with timeout_ms the silent
// timeout; it returns how many it sent.
func sendSilent(ctx context.Context, brokers []string, topic string, perSecond int, window time.Duration) (int, error) {
	cl, err := newProducer(brokers, topic)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var failed sync.Once
	var produceErr error
	sent := 0
	t := time.NewTicker(time.Second / time.Duration(max(1, perSecond)))
	defer t.Stop()
	stop := time.Now().Add(window)
	for now := time.Now(); now.Before(stop); {
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case now = <-t.C:
		}
		id := fmt.Sprintf("silent-%06d", sent)
		v := fmt.Appendf(nil, `{"device_id":"%s","ts":%d,"timeout_ms":%d}`, id, now.UnixMilli(), costSilentTimeout.Milliseconds())
		cl.Produce(ctx, &kgo.Record{Key: []byte(id), Value: v, Timestamp: now}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Do(func() { produceErr = err })
			}
		})
		sent++
	}
	if err := cl.Flush(ctx); err != nil {
		return sent, err
	}
	if produceErr != nil {
		return sent, fmt.Errorf("silent heartbeats: %w", produceErr)
	}
	return sent, nil
}
