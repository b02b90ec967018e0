package main

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/app/demo"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/testenv/host"
	"github.com/flatline-dev/flatline/shard"
)

// scenarioInfra is what a scenario runs against: a fresh kfake with
// flatline's topics and a fresh redis-server with the store over it.
type scenarioInfra struct {
	kc      kafkaconn.Config // the default settings, whose topics brokers serve
	brokers []string
	rp      *redisProc
	st      *shard.Store
	stop    func()
}

// startInfra starts a scenario's Kafka and Redis; stop tears both down.
func startInfra(ctx context.Context, o *options) (*scenarioInfra, error) {
	kc := configs.Default().Kafka
	topics := append([]string{kc.SignalsTopic, kc.TimeoutsTopic, kc.DeadLetterTopic, parentsTopic}, shapeTopics(o.shapes)...)
	brokers, stopKafka, err := demo.StartKafka(ctx, o.partitions, topics...)
	if err != nil {
		return nil, err
	}
	rp, err := startRedis()
	if err != nil {
		stopKafka()
		return nil, err
	}
	st, err := rp.Store(ctx)
	if err != nil {
		rp.Close()
		stopKafka()
		return nil, err
	}
	return &scenarioInfra{kc: kc, brokers: brokers, rp: rp, st: st, stop: func() { rp.Close(); stopKafka() }}, nil
}

// serve starts flatline with every role on this infrastructure, with
// settings on top of the scenario's, and waits until it is ready to fire:
// a watermark for every partition and an owner for every shard. The caller
// stops it.
func (in *scenarioInfra) serve(ctx context.Context, o *options, settings map[string]string, profile string) (*flatlineProc, error) {
	all := map[string]string{
		"redis.addrs": in.rp.Addr, "kafka.brokers": strings.Join(in.brokers, ","), "log.level": "warn",
		"shards.initial_count": fmt.Sprint(o.shards),
	}
	maps.Copy(all, settings)
	fl, err := startFlatline(all, profile)
	if err != nil {
		return nil, err
	}
	if _, err := waitReady(ctx, in.st, fl, o.partitions, o.shards, 30*time.Second); err != nil {
		fl.Stop(15 * time.Second)
		return nil, err
	}
	return fl, nil
}

// redisProc is a private redis-server child on a free port, with this
// program's client of it.
type redisProc struct {
	Addr string
	PID  int
	rdb  *redis.Client
	srv  *testenv.RedisServer
}

// startRedis starts a fresh redis-server (testenv.StartRedis: a real one,
// never a stand-in that would make the figures meaningless), with the
// settings docs/operations.md asks of production.
func startRedis() (*redisProc, error) {
	srv, err := testenv.StartRedis("--zset-max-listpack-entries", strconv.Itoa(redisconn.ZsetListpackEntries))
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 32})
	return &redisProc{Addr: srv.Addr(), PID: srv.PID(), rdb: rdb, srv: srv}, nil
}

func (r *redisProc) Close() {
	_ = r.rdb.Close()
	r.srv.Close()
}

// Store is flatline's store over this server with the default key prefix.
func (r *redisProc) Store(ctx context.Context) (*shard.Store, error) {
	st := shard.NewStore(r.rdb, shard.NewKeys(keyPrefix))
	if err := st.LoadScripts(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// UsedMemory is INFO memory's used_memory.
func (r *redisProc) UsedMemory(ctx context.Context) (int64, error) {
	info, err := r.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(redisconn.ParseInfo(info)["used_memory"], 10, 64)
}

// TotalCommands is INFO stats' total_commands_processed.
func (r *redisProc) TotalCommands(ctx context.Context) (int64, error) {
	info, err := r.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(redisconn.ParseInfo(info)["total_commands_processed"], 10, 64)
}

// CommandStats returns INFO commandstats as command -> (calls, usec).
func (r *redisProc) CommandStats(ctx context.Context) (map[string]cmdStat, error) {
	info, err := r.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				s.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return out, nil
}

type cmdStat struct{ Calls, Usec int64 }

// perUnitUsec is cpuSeconds in microseconds per unit (0 without units).
func perUnitUsec(cpuSeconds, units float64) float64 {
	if units <= 0 {
		return 0
	}
	return cpuSeconds * 1e6 / units
}

// topCommands is the difference of two commandstats snapshots, busiest
// first: where Redis spent its time in a scenario.
func topCommands(before, after map[string]cmdStat, n int) []RedisCommand {
	var out []RedisCommand
	var total int64
	for name, a := range after {
		d := cmdStat{Calls: a.Calls - before[name].Calls, Usec: a.Usec - before[name].Usec}
		if d.Calls <= 0 {
			continue
		}
		total += d.Usec
		out = append(out, RedisCommand{Command: name, Calls: d.Calls, Seconds: float64(d.Usec) / 1e6,
			UsecPerCall: float64(d.Usec) / float64(d.Calls)})
	}
	sortBy(out, func(c RedisCommand) float64 { return -c.Seconds })
	for i := range out {
		if total > 0 {
			out[i].Share = out[i].Seconds * 1e6 / float64(total)
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// cpuMeter measures the CPU seconds the three processes of a scenario use
// over a window: flatline, redis-server and this one (kfake and the load
// generators), so a reader sees where the machine's two cores went; and
// what else took them: the machine's other processes, and the hypervisor's
// steal on a virtual machine.
type cpuMeter struct {
	pids    map[string]int
	start   map[string]time.Duration
	machine host.CPUTimes
	at      time.Time
}

func newCPUMeter(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: map[string]time.Duration{}, machine: host.ReadCPUTimes(), at: time.Now()}
	for name, pid := range pids {
		m.start[name] = host.ReadProc(pid).CPU
	}
	return m
}

// Split returns CPU seconds per process since the meter started, with
// "wall", "others" (the machine's busy time beyond the three processes) and
// "steal" (the hypervisor's).
func (m *cpuMeter) Split() map[string]float64 {
	out := map[string]float64{"wall": time.Since(m.at).Seconds()}
	mine := 0.0
	for name, pid := range m.pids {
		out[name] = (host.ReadProc(pid).CPU - m.start[name]).Seconds()
		mine += out[name]
	}
	now := host.ReadCPUTimes()
	out["others"] = max(0, (now.Busy-m.machine.Busy).Seconds()-mine)
	out["steal"] = (now.Steal - m.machine.Steal).Seconds()
	return out
}

// stealShare is the hypervisor's steal as a share of the cores' time over
// a split's wall time.
func stealShare(split map[string]float64) float64 {
	if wall := split["wall"]; wall > 0 {
		return split["steal"] / (wall * float64(runtime.NumCPU()))
	}
	return 0
}
