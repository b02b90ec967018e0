package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/shard"
)

// LatenessResult is scenario 2: how late timeouts are detected and
// published while a large fleet keeps resetting.
type LatenessResult struct {
	Devices     int     `json:"devices"`
	LoadSeconds float64 `json:"load_seconds"`
	// TimeoutDefault is flatline's timeouts.default in the run: 120 s, more
	// beyond a million devices (latenessSlack).
	TimeoutDefault     string  `json:"timeouts_default"`
	BackgroundRate     int     `json:"background_resets_per_second_target"`
	BackgroundSent     float64 `json:"background_sent_per_second"`
	BackgroundIngested float64 `json:"background_ingested_per_second"`
	// FetchAnswers is how many fetch answers that brought records flatline
	// read a second over the window (flatline_ingest_fetch_seconds_count).
	FetchAnswers  float64 `json:"fetch_answers_with_records_per_second"`
	Probes        int     `json:"probes"`
	SpreadSeconds float64 `json:"spread_seconds"`
	Received      int     `json:"received"`
	// Arrivals are the probes' timeouts at the test consumer.
	Arrivals
	// FlatlineAckP99 is flatline's own histogram (deadline → Kafka ack)
	// p99, as the upper bound of its bucket.
	FlatlineAckP99Ms float64 `json:"flatline_histogram_p99_bucket_ms"`
	WatermarkLagMs   float64 `json:"watermark_lag_ms_at_end"`
	// WatermarkLag samples now − min over partitions of wm(p) every 20 ms
	// during the window: scanners fire nothing newer, so this is the floor
	// of detection lateness.
	WatermarkLag sample.Dist `json:"watermark_lag_sampled"`
	// BrokerRTT samples, every 20 ms, how long the bench's Kafka (kfake,
	// in this process) takes to answer a ListOffsets for the signals topic
	// to a client of its own: what a watermark stall costs that flatline
	// does not cause. Sampled beside WatermarkLag.
	BrokerRTT sample.Dist `json:"broker_rtt_sampled"`
	// Stages are flatline's own histograms of a heartbeat's way from Kafka
	// to Redis over the window, each p99 as the upper bound of its bucket:
	// the brokers' answers, flatline's queue, the Redis write.
	Stages Stages `json:"ingest_stage_p99_bucket_ms"`
	// FlatlineCores is the flatline process's CPU time over the window's
	// wall time, under the background load: the steady-state cost the
	// Helm chart's CPU request is sized from (deploy/README.md, "Sizing").
	FlatlineCores float64 `json:"flatline_cores"`
	// FlatlinePeakRSSBytes is the flatline process's peak RSS (VmHWM) at
	// the end of the window, the 1M devices tracked.
	FlatlinePeakRSSBytes int64 `json:"flatline_peak_rss_bytes"`
	Cost
	// Runs lists every run's tail (scenario 2 runs -lat-runs times, each
	// on fresh servers); the figures above are the median run's by p99.
	Runs []LatenessRun `json:"runs,omitempty"`
}

// Stages are the p99 buckets of flatline_ingest_{fetch,queue,write}_seconds
// over a window, in ms.
type Stages struct {
	Fetch float64 `json:"fetch"`
	Queue float64 `json:"queue"`
	Write float64 `json:"write"`
}

func (s Stages) String() string {
	return fmt.Sprintf("%s / %s / %s", ms(s.Fetch), ms(s.Queue), ms(s.Write))
}

// stagesBetween reads Stages from two scrapes of flatline's metrics.
func stagesBetween(before, after e2etest.Metrics) Stages {
	p99 := func(name string) float64 {
		bound, _ := histQuantile(before, after, name, 0.99)
		return bound * 1e3
	}
	return Stages{Fetch: p99("flatline_ingest_fetch_seconds"), Queue: p99("flatline_ingest_queue_seconds"), Write: p99("flatline_ingest_write_seconds")}
}

// LatenessRun is one run's tail.
type LatenessRun struct {
	Received        int     `json:"received"`
	P99Ms           float64 `json:"arrival_minus_deadline_p99_ms"`
	MaxMs           float64 `json:"arrival_minus_deadline_max_ms"`
	WatermarkLagP99 float64 `json:"watermark_lag_p99_ms"`
	BrokerRTTP99    float64 `json:"broker_rtt_p99_ms"`
	Stages          Stages  `json:"ingest_stage_p99_bucket_ms"`
	FetchAnswers    float64 `json:"fetch_answers_with_records_per_second"`
	// StealShare is the hypervisor's steal over the run's window, a share
	// of the machine's core time; OthersCores the machine's other
	// processes' CPU seconds a second (cpuMeter.Split).
	StealShare  float64 `json:"steal_share"`
	OthersCores float64 `json:"others_cores"`
}

// medianLateness returns the median run by p99, with every run listed.
func medianLateness(runs []*LatenessResult) *LatenessResult {
	sorted := append([]*LatenessResult(nil), runs...)
	sortBy(sorted, func(r *LatenessResult) float64 { return r.Lateness.P99 })
	med := sorted[len(sorted)/2]
	var all []LatenessRun
	for _, r := range runs {
		all = append(all, LatenessRun{Received: r.Received, P99Ms: r.Lateness.P99, MaxMs: r.Lateness.Max,
			WatermarkLagP99: r.WatermarkLag.P99, BrokerRTTP99: r.BrokerRTT.P99, Stages: r.Stages, FetchAnswers: r.FetchAnswers,
			StealShare: stealShare(r.CPUSplit), OthersCores: r.CPUSplit["others"] / max(r.CPUSplit["wall"], 1e-9)})
	}
	med.Runs = all
	return med
}

// latenessSlack is how much later than 40–100 s out a fleet of n devices
// is loaded, and how much longer than 120 s its timeout is: 10 µs a device
// beyond the first million (a load at 100,000 devices/s, a fifth of
// Store.Write's rate). Under the trickle no heartbeat moves the fleet, and
// the run ends about 30 s after the load: without it the first deadlines
// of 10,000,000 devices, loaded in half a minute, would fall due in the
// probes' window.
func latenessSlack(n int) time.Duration {
	return time.Duration(max(0, n-1_000_000)) * 10 * time.Microsecond
}

// latenessLoadRatio is the target under load: each run's p99 at most this
// many times the same bench run's p99 under a trickle.
const latenessLoadRatio = 2.0

// runLateness runs scenario 2 with rate background heartbeats per second.
func runLateness(ctx context.Context, o *options, rate int) (*LatenessResult, error) {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	kc, brokers, rp, st := infra.kc, infra.brokers, infra.rp, infra.st
	res := &LatenessResult{Devices: o.latDevices, BackgroundRate: rate, Probes: o.latProbes, SpreadSeconds: o.latSpread.Seconds()}

	// The fleet: deadlines 40–100 s out, so none expires during the run;
	// heartbeats (timeout 120 s) move every one of them later. Both are
	// put later by latenessSlack for a fleet too large to load in time.
	status("lateness: tracking %d devices through Store.Write", o.latDevices)
	ids := sample.DeviceIDs("bg-", o.latDevices)
	slack := latenessSlack(len(ids))
	res.TimeoutDefault = (120*time.Second + slack).String()
	now := time.Now().Add(slack).UnixMilli()
	n := int64(len(ids))
	load, err := loadDeadlines(ctx, st, o.shards, ids, func(k int) int64 { return now + 40_000 + int64(k)*60_000/n })
	if err != nil {
		return nil, err
	}
	res.LoadSeconds = load.Seconds()
	status("lateness: loaded in %.1fs", res.LoadSeconds)

	name := "lateness"
	if rate != o.latRate {
		name = "lateness-sparse"
	}
	res.Profile = o.profilePath(name)
	fl, err := infra.serve(ctx, o, map[string]string{"timeouts.default": res.TimeoutDefault}, res.Profile)
	if err != nil {
		return nil, err
	}
	defer fl.Stop(15 * time.Second)

	tally := newArrivalTally("probe-")
	cons, err := startConsumer(brokers, kc.TimeoutsTopic, tally.add)
	if err != nil {
		return nil, err
	}
	defer cons.Stop()

	status("lateness: background load %d heartbeats/s", rate)
	prod, err := startRateProducer(brokers, kc.SignalsTopic, ids, rate)
	if err != nil {
		return nil, err
	}
	defer prod.Stop()
	time.Sleep(2 * time.Second) // let ingest settle into the load
	m0, _ := fl.Metrics(ctx)
	sent0 := prod.sent.Load()
	cmdBefore, _ := rp.CommandStats(ctx)
	meter := newCPUMeter(map[string]int{"flatline": fl.PID, "redis": rp.PID, "bench+kfake": selfPID()})
	t0 := time.Now()

	// The probes: deadlines spread evenly over the window, written directly.
	probes := sample.DeviceIDs("probe-", o.latProbes)
	first := time.Now().Add(time.Second).UnixMilli()
	spreadMs := o.latSpread.Milliseconds()
	var b shard.Batch
	b.Reset(o.shards)
	for k, id := range probes {
		b.Add(shard.Of(shard.Hash(id), o.shards), id, shard.Score(first+int64(k)*spreadMs/int64(len(probes)), 0), 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		return nil, err
	}
	status("lateness: %d deadlines over the next %s", o.latProbes, o.latSpread)
	end := time.UnixMilli(first + spreadMs).Add(15 * time.Second)
	var wmLag []float64
	stopWM := make(chan struct{})
	wmDone := make(chan struct{})
	rtts, err := sampleBrokerRTT(brokers, kc.SignalsTopic, o.partitions, 20*time.Millisecond, stopWM)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(wmDone)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopWM:
				return
			case <-t.C:
			}
			wms, _, err := st.Watermarks(ctx)
			if err != nil || len(wms) == 0 {
				continue
			}
			lo := int64(1 << 62)
			for _, v := range wms {
				lo = min(lo, v)
			}
			wmLag = append(wmLag, float64(time.Now().UnixMicro())/1e3-float64(lo))
		}
	}()
	for {
		if tally.received() >= len(probes) || time.Now().After(end) {
			break
		}
		if exited, err := fl.Exited(); exited {
			return nil, fmt.Errorf("flatline exited: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(t0).Seconds()
	close(stopWM)
	<-wmDone
	res.WatermarkLag = sample.DistOf(wmLag)
	res.BrokerRTT = sample.DistOf(<-rtts)
	res.CPUSplit = meter.Split()
	if wall := res.CPUSplit["wall"]; wall > 0 {
		res.FlatlineCores = res.CPUSplit["flatline"] / wall
	}
	res.FlatlinePeakRSSBytes = fl.Proc().PeakRSS
	m1, err := fl.Metrics(ctx)
	if err == nil && m0 != nil {
		res.BackgroundIngested = (sumMetric(m1, "flatline_heartbeats_consumed_total") - sumMetric(m0, "flatline_heartbeats_consumed_total")) / elapsed
		bound, _ := histQuantile(m0, m1, "flatline_detection_lateness_seconds", 0.99)
		res.FlatlineAckP99Ms = bound * 1e3
		res.Stages = stagesBetween(m0, m1)
		res.FetchAnswers = (sumMetric(m1, "flatline_ingest_fetch_seconds") - sumMetric(m0, "flatline_ingest_fetch_seconds")) / elapsed
		res.WatermarkLagMs = sumMetric(m1, "flatline_watermark_lag_seconds") * 1e3
	}
	res.BackgroundSent = float64(prod.sent.Load()-sent0) / elapsed
	if cmdAfter, err := rp.CommandStats(ctx); err == nil {
		res.RedisTop = topCommands(cmdBefore, cmdAfter, 5)
	}
	res.Received, res.Arrivals, _ = tally.result()
	return res, nil
}
