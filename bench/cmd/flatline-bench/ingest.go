package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/shard"
)

// IngestResult is scenario 1 (resets/s against the Redis ceiling) and
// scenario 5 (process cost), which is measured during it.
type IngestResult struct {
	Devices        int     `json:"devices"`
	Heartbeats     int     `json:"heartbeats"`
	Partitions     int     `json:"partitions"`
	Shards         int     `json:"shards"`
	PreloadSeconds float64 `json:"preload_seconds"`
	// Pairs are the exact runs, each followed at once by a ceiling
	// measurement: the machine is shared, and a ratio is only fair between
	// figures taken next to each other. Exact and Ceiling are the pair
	// with the median ratio.
	Pairs     []IngestPair `json:"pairs"`
	Exact     *IngestRun   `json:"exact"`
	Coalesced *IngestRun   `json:"coalesced,omitempty"`
	Ceiling   *CeilingRun  `json:"ceiling"`
	// RatioExact is the median of the pairs' heartbeats/s (from start)
	// over members/s; RatioCoalesced is the median coalesced run (of as
	// many as there are pairs) over the median ceiling of all pairs.
	RatioExact     float64 `json:"ratio_exact_to_ceiling"`
	RatioCoalesced float64 `json:"ratio_coalesced_to_ceiling,omitempty"`
	// CoalescedRuns lists every coalesced run; Coalesced is the median.
	CoalescedRuns []*IngestRun `json:"coalesced_runs,omitempty"`
	// MedianExactCPUPerMillion is the median of the exact runs' flatline
	// CPU-s per million heartbeats.
	MedianExactCPUPerMillion float64 `json:"median_exact_cpu_seconds_per_million"`
	// Shapes are the exact runs over the same fleet written as bridges
	// write it (-shapes), each over the median ceiling.
	Shapes []ShapeResult `json:"shapes,omitempty"`
}

// IngestPair is one exact run and the ceiling measured right after it.
type IngestPair struct {
	Exact   *IngestRun  `json:"exact"`
	Ceiling *CeilingRun `json:"ceiling"`
	Ratio   float64     `json:"ratio"`
}

// IngestRun is one flatline run over the preloaded backlog.
type IngestRun struct {
	Mode      string `json:"mode"`
	Completed bool   `json:"completed"`
	// FromStartSeconds: child process started → group lag 0 and every
	// device tracked. FirstWriteSeconds: started → first device tracked
	// (process start, group join, first fetch).
	FromStartSeconds  float64 `json:"from_start_seconds"`
	FirstWriteSeconds float64 `json:"first_write_seconds"`
	// HeartbeatsPerSecond = heartbeats / FromStartSeconds (the figure
	// the targets use); SteadyPerSecond excludes the start.
	HeartbeatsPerSecond float64 `json:"heartbeats_per_second"`
	SteadyPerSecond     float64 `json:"steady_heartbeats_per_second"`
	Consumed            float64 `json:"heartbeats_consumed"`
	RedisWrites         float64 `json:"redis_deadline_writes"`
	RedisBatches        float64 `json:"redis_write_batches"`
	Coalesced           float64 `json:"resets_coalesced"`
	// Process cost (scenario 5): the flatline process alone.
	CPUSeconds           float64 `json:"flatline_cpu_seconds"`
	CPUSecondsPerMillion float64 `json:"flatline_cpu_seconds_per_million_heartbeats"`
	PeakRSSBytes         int64   `json:"flatline_peak_rss_bytes"`
	Cost
}

// CeilingRun is variadic ZADD GT pipelined from Go into the same keys.
type CeilingRun struct {
	Seconds          float64 `json:"seconds"`
	MembersPerSecond float64 `json:"members_per_second"`
	Workers          int     `json:"workers"`
	PipelineDepth    int     `json:"pipeline_commands"`
	PairsPerCommand  int     `json:"pairs_per_command"`
	Cost
}

// Cost is where the CPU went during a run's measured window: CPU seconds
// per process, Redis's busiest commands, and the file of flatline's CPU
// profile when one was taken. Embedded, its fields are the result's own in
// the JSON.
type Cost struct {
	CPUSplit map[string]float64 `json:"cpu_seconds_by_process"`
	RedisTop []RedisCommand     `json:"redis_top_commands"`
	// RedisCPUUsecPer is redis-server's CPU time (its process's, I/O
	// included) per unit of the run's work: per heartbeat, per member of
	// the ceiling, per fired event. The ceiling's beside flatline's is what
	// flatline costs Redis over the bare ZADD GT.
	RedisCPUUsecPer float64 `json:"redis_cpu_usec_per_unit,omitempty"`
	Profile         string  `json:"cpu_profile,omitempty"`
}

// RedisCommand is one line of the INFO commandstats difference.
type RedisCommand struct {
	Command     string  `json:"command"`
	Calls       int64   `json:"calls"`
	Seconds     float64 `json:"seconds"`
	UsecPerCall float64 `json:"usec_per_call"`
	Share       float64 `json:"share"`
}

func runIngest(ctx context.Context, o *options) (*IngestResult, error) {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	brokers, rp, st := infra.brokers, infra.rp, infra.st
	start := time.Now()
	b, err := infra.preloadBacklog(ctx, o, "ingest")
	if err != nil {
		return nil, err
	}
	ids, rounds, ends := b.ids, b.rounds, b.ends
	res := &IngestResult{Devices: o.ingestDevices, Heartbeats: b.heartbeats, Partitions: o.partitions, Shards: o.shards}
	res.PreloadSeconds = time.Since(start).Seconds()
	status("ingest: preloaded in %.1fs", res.PreloadSeconds)

	for k := 0; k < max(1, o.ingestPairs); k++ {
		var pair IngestPair
		mode := "exact"
		if k > 0 {
			mode = fmt.Sprintf("exact-%d", k+1)
		}
		if pair.Exact, err = infra.ingestBacklog(ctx, o, b, mode, nil, nil); err != nil {
			return nil, err
		}
		if pair.Ceiling, err = redisCeiling(ctx, rp, ids, o.shards, o.ceilingDuration); err != nil {
			return nil, err
		}
		if pair.Ceiling.MembersPerSecond > 0 {
			pair.Ratio = pair.Exact.HeartbeatsPerSecond / pair.Ceiling.MembersPerSecond
		}
		status("ingest: %s %.0f heartbeats/s from start, then Redis ceiling %.0f members/s: %.2f ×",
			mode, pair.Exact.HeartbeatsPerSecond, pair.Ceiling.MembersPerSecond, pair.Ratio)
		res.Pairs = append(res.Pairs, pair)
	}
	if o.monitorFile != "" {
		if err := monitorExact(ctx, o, brokers, rp, st, ends, res.Heartbeats); err != nil {
			return nil, err
		}
	}
	byRatio := append([]IngestPair(nil), res.Pairs...)
	sortBy(byRatio, func(p IngestPair) float64 { return p.Ratio })
	median := byRatio[len(byRatio)/2]
	res.Exact, res.Ceiling, res.RatioExact = median.Exact, median.Ceiling, median.Ratio
	ceilings := make([]float64, len(res.Pairs))
	for k, p := range res.Pairs {
		ceilings[k] = p.Ceiling.MembersPerSecond
	}
	sortBy(ceilings, func(v float64) float64 { return v })
	medianCeiling := ceilings[len(ceilings)/2]

	res.MedianExactCPUPerMillion = medianOf(res.Pairs, func(p IngestPair) float64 { return p.Exact.CPUSecondsPerMillion })
	if o.coalesceWindow > 0 {
		var runs []*IngestRun
		for k := 0; k < max(1, o.ingestPairs); k++ {
			mode := "coalesce_window=" + o.coalesceWindow.String()
			if k > 0 {
				mode += fmt.Sprintf("-%d", k+1) // a fresh consumer group: its own name
			}
			run, err := infra.ingestBacklog(ctx, o, b, mode,
				map[string]string{"ingest.coalesce_window": o.coalesceWindow.String()}, nil)
			if err != nil {
				return nil, err
			}
			status("ingest: coalesced %.0f heartbeats/s from start", run.HeartbeatsPerSecond)
			runs = append(runs, run)
		}
		res.CoalescedRuns = runs
		sorted := append([]*IngestRun(nil), runs...)
		sortBy(sorted, func(r *IngestRun) float64 { return r.HeartbeatsPerSecond })
		res.Coalesced = sorted[len(sorted)/2]
		if medianCeiling > 0 {
			res.RatioCoalesced = res.Coalesced.HeartbeatsPerSecond / medianCeiling
		}
	}
	if len(o.shapes) > 0 {
		base := time.Now().Add(-time.Duration(rounds) * time.Second)
		if res.Shapes, err = runShapes(ctx, o, infra, ids, rounds, res.Heartbeats, base, medianCeiling); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ingestOnce runs flatline (ingest role only, with settings on top) over
// the preloaded backlog from offset 0 with a fresh consumer group and times
// it.
func ingestOnce(ctx context.Context, o *options, brokers []string, rp *redisProc, st *shard.Store, ends map[int]int64, heartbeats int, mode string, settings map[string]string) (*IngestRun, error) {
	kc := configs.Default().Kafka
	group := "bench-" + strings.NewReplacer("=", "-", ".", "-").Replace(mode)
	run := &IngestRun{Mode: mode}
	run.Profile = o.profilePath("ingest-" + group)
	cmdBefore, _ := rp.CommandStats(ctx)
	all := map[string]string{
		"redis.addrs": rp.Addr, "kafka.brokers": strings.Join(brokers, ","), "kafka.group_id": group,
		"roles": "ingest", "log.level": "warn", "shards.initial_count": fmt.Sprint(o.shards),
	}
	maps.Copy(all, settings)
	topic := kc.SignalsTopic
	if t := settings["kafka.signals_topic"]; t != "" {
		topic = t
	}
	fl, err := startFlatline(all, run.Profile)
	if err != nil {
		return nil, err
	}
	defer fl.Stop(15 * time.Second)
	meter := newCPUMeter(map[string]int{"flatline": fl.PID, "redis": rp.PID, "bench+kfake": selfPID()})
	want := int64(o.ingestDevices)
	var first time.Time
	deadline := fl.Started.Add(o.ingestTimeout)
	for {
		if exited, err := fl.Exited(); exited {
			return nil, fmt.Errorf("flatline exited: %v", err)
		}
		n, err := st.Tracked(ctx, o.shards)
		if err == nil && n > 0 && first.IsZero() {
			first = time.Now()
		}
		if err == nil && n >= want {
			committed, err := groupCommitted(ctx, brokers, group, topic, o.partitions)
			caughtUp := err == nil
			for p, end := range ends {
				caughtUp = caughtUp && committed[p] >= end
			}
			if caughtUp {
				run.Completed = true
				break
			}
		}
		if time.Now().After(deadline) {
			status("ingest %s: not caught up within %s; reporting the partial rate", mode, o.ingestTimeout)
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond): // the end is seen within 10 ms
		}
	}
	done := time.Now()
	ps := fl.Proc()
	run.CPUSplit = meter.Split()
	m, err := fl.Metrics(ctx)
	if err == nil {
		run.Consumed = sumMetric(m, "flatline_heartbeats_consumed_total")
		run.RedisWrites = sumMetric(m, "flatline_redis_deadline_writes_total")
		run.RedisBatches = sumMetric(m, "flatline_redis_write_batches_total")
		run.Coalesced = sumMetric(m, "flatline_resets_coalesced_total")
	}
	if cmdAfter, err := rp.CommandStats(ctx); err == nil {
		run.RedisTop = topCommands(cmdBefore, cmdAfter, 5)
	}
	run.RedisCPUUsecPer = perUnitUsec(run.CPUSplit["redis"], float64(heartbeats))
	if err := fl.Stop(15 * time.Second); err != nil {
		status("ingest %s: %v", mode, err)
	}
	run.FromStartSeconds = done.Sub(fl.Started).Seconds()
	hb := float64(heartbeats)
	if !run.Completed {
		hb = run.Consumed
	}
	run.HeartbeatsPerSecond = hb / run.FromStartSeconds
	if !first.IsZero() {
		run.FirstWriteSeconds = first.Sub(fl.Started).Seconds()
		if s := done.Sub(first).Seconds(); s > 0 {
			run.SteadyPerSecond = hb / s
		}
	}
	run.CPUSeconds = ps.CPU.Seconds()
	run.CPUSecondsPerMillion = run.CPUSeconds / (hb / 1e6)
	run.PeakRSSBytes = ps.PeakRSS
	return run, nil
}

// redisCeiling measures how many deadline resets per second Redis itself
// takes: variadic ZADD GT of existing members with later scores, pipelined
// one command per shard key, from several connections at once.
func redisCeiling(ctx context.Context, rp *redisProc, ids []string, shards int, dur time.Duration) (*CeilingRun, error) {
	const (
		workers = 4
		pairs   = 256 // an ingest batch of 4096 spread over 16 shards
	)
	keys := shard.NewKeys(keyPrefix)
	per := make([][]string, shards)
	for _, id := range ids {
		i := shard.Of(shard.Hash(id), shards)
		per[i] = append(per[i], id)
	}
	c := &CeilingRun{Workers: workers, PipelineDepth: shards, PairsPerCommand: pairs}
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr, PoolSize: workers})
	defer rdb.Close()
	var total atomic.Int64
	var seq atomic.Int64
	base := time.Now().Add(time.Hour).UnixMilli()
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	meter := newCPUMeter(map[string]int{"redis": rp.PID, "bench": selfPID()})
	cmdBefore, _ := rp.CommandStats(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cursor := make([]int, shards)
			for i := range cursor {
				cursor[i] = (w * pairs) % max(1, len(per[i]))
			}
			args := make([][]any, shards)
			for ctx.Err() == nil {
				score := shard.Score(base+seq.Add(1), 0)
				n := 0
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for i := 0; i < shards; i++ {
						members := per[i]
						if len(members) == 0 {
							continue
						}
						a := append(args[i][:0], "ZADD", keys.Deadlines(i), "GT")
						for k := 0; k < pairs && k < len(members); k++ {
							a = append(a, score, members[cursor[i]])
							cursor[i]++
							if cursor[i] == len(members) {
								cursor[i] = 0
							}
							n++
						}
						args[i] = a
						p.Do(ctx, a...)
					}
					return nil
				})
				if err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
					}
					return
				}
				total.Add(int64(n))
			}
		}(w)
	}
	wg.Wait()
	c.Seconds = time.Since(start).Seconds()
	c.CPUSplit = meter.Split()
	if e, ok := firstErr.Load().(error); ok && e != nil {
		return nil, fmt.Errorf("ceiling: %w", e)
	}
	c.MembersPerSecond = float64(total.Load()) / c.Seconds
	if cmdAfter, err := rp.CommandStats(context.WithoutCancel(ctx)); err == nil {
		c.RedisTop = topCommands(cmdBefore, cmdAfter, 5)
	}
	c.RedisCPUUsecPer = perUnitUsec(c.CPUSplit["redis"], float64(total.Load()))
	return c, nil
}

// monitorExact runs one more exact ingest, on an emptied Redis, while
// redis-cli's MONITOR writes every command Redis runs to o.monitorFile: the
// order in which flatline's deadline writes reach Redis, for
// bench/cmd/zadd-order to replay. MONITOR slows Redis down, so the run's
// figures are not used.
func monitorExact(ctx context.Context, o *options, brokers []string, rp *redisProc, st *shard.Store, ends map[int]int64, heartbeats int) error {
	if err := rp.rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	f, err := os.Create(o.monitorFile)
	if err != nil {
		return fmt.Errorf("-monitor: %w", err)
	}
	defer f.Close()
	host, port, err := net.SplitHostPort(rp.Addr)
	if err != nil {
		return err
	}
	mon := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "monitor")
	mon.Stdout = f
	if err := mon.Start(); err != nil {
		return fmt.Errorf("-monitor: redis-cli: %w", err)
	}
	// MONITOR answers OK once it is on; the commands follow.
	time.Sleep(200 * time.Millisecond)
	status("ingest: one more exact run, its Redis commands captured by MONITOR into %s", o.monitorFile)
	_, runErr := ingestOnce(ctx, o, brokers, rp, st, ends, heartbeats, "exact-monitored", nil)
	time.Sleep(200 * time.Millisecond) // the last lines on their way
	_ = mon.Process.Kill()
	_ = mon.Wait()
	return runErr
}
