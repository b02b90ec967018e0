package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// MassResult is scenario 3: every device silent at once.
type MassResult struct {
	Devices int `json:"devices"`
	// Beneath are the devices tracked beside the due ones (the growth
	// sweep's keyspace), not due during the run.
	Beneath int `json:"tracked_beneath,omitempty"`
	// LoadEndBeforeDeadline is how long before the shared deadline the
	// direct load finished (negative: after it, so some members were
	// written already due).
	LoadSeconds           float64 `json:"load_seconds"`
	LoadEndBeforeDeadline float64 `json:"load_end_before_deadline_seconds"`
	Received              int     `json:"received"`
	Unique                int     `json:"unique"`
	Unexpected            int     `json:"unexpected_keys"`
	// FirstSeconds / LastSeconds: arrival of the first / last event at the
	// test consumer after the deadline. DrainedSeconds: deadline → every
	// due member removed from its shard (removal follows Kafka's ack).
	FirstSeconds   float64 `json:"first_event_after_deadline_seconds"`
	LastSeconds    float64 `json:"last_event_after_deadline_seconds"`
	DrainedSeconds float64 `json:"shards_empty_after_deadline_seconds"`
	// EventsPerSecond = devices / LastSeconds; PeakPerSecond is the best
	// one-second window.
	EventsPerSecond      float64 `json:"events_per_second"`
	PeakPerSecond        float64 `json:"peak_events_per_second"`
	CPUSeconds           float64 `json:"flatline_cpu_seconds"`
	CPUSecondsPerMillion float64 `json:"flatline_cpu_seconds_per_million_events"`
	PeakRSSBytes         int64   `json:"flatline_peak_rss_bytes"`
	Cost
	Completed     bool    `json:"completed"`
	WaitedSeconds float64 `json:"waited_after_deadline_seconds"`
	// Runs lists every run (each on a fresh Redis, Kafka and flatline);
	// the figures above are those of the median run by drain rate.
	Runs []MassRun `json:"runs,omitempty"`
	// RatioTTL is the median over the runs of flatline's drain rate over
	// the Redis-TTL-keys peer's, measured right after it on a fresh
	// redis-server (with -peers); MedianCPUPerMillion the median of the
	// runs' flatline CPU-s per million events.
	RatioTTL            float64 `json:"ratio_to_ttl_keys,omitempty"`
	MedianCPUPerMillion float64 `json:"median_flatline_cpu_seconds_per_million_events"`
}

// MassRun is one run's headline figures, and the TTL keys' drain measured
// right after it.
type MassRun struct {
	EventsPerSecond      float64 `json:"events_per_second"`
	LastSeconds          float64 `json:"last_event_after_deadline_seconds"`
	Completed            bool    `json:"completed"`
	CPUSecondsPerMillion float64 `json:"flatline_cpu_seconds_per_million_events"`
	TTLPerSecond         float64 `json:"ttl_keys_events_per_second,omitempty"`
	RatioTTL             float64 `json:"ratio_to_ttl_keys,omitempty"`
}

// runMass runs the scenario o.massRuns times and returns the median run by
// drain rate, with every run listed: on a shared machine one run is a
// sample, not a measurement.
func runMass(ctx context.Context, o *options) (*MassResult, error) {
	var all []*MassResult
	var runs []MassRun
	for k := 0; k < max(1, o.massRuns); k++ {
		r, err := runMassOnce(ctx, o, k)
		if err != nil {
			return nil, err
		}
		run := MassRun{EventsPerSecond: r.EventsPerSecond, LastSeconds: r.LastSeconds, Completed: r.Completed, CPUSecondsPerMillion: r.CPUSecondsPerMillion}
		status("mass: run %d: %.0f events/s, last at +%.2f s, %.2f flatline CPU-s per million", k+1, r.EventsPerSecond, r.LastSeconds, r.CPUSecondsPerMillion)
		if o.peersBin != "" {
			// The peer it is meant to beat, on a fresh redis-server,
			// right after: the pair shares the machine's spell.
			pr, err := runPeers(ctx, o, "-only", "ttl-mass", "-mass-ttl", fmt.Sprint(o.massDevices))
			if err != nil {
				return nil, fmt.Errorf("TTL keys mass expiry: %w", err)
			}
			if v, ok := pr.value("mass: drain rate"); ok && v > 0 {
				run.TTLPerSecond, run.RatioTTL = v, r.EventsPerSecond/v
			}
			status("mass: run %d: Redis TTL keys %.0f events/s: %.2f ×", k+1, run.TTLPerSecond, run.RatioTTL)
		}
		all = append(all, r)
		runs = append(runs, run)
	}
	sorted := append([]*MassResult(nil), all...)
	sortBy(sorted, func(r *MassResult) float64 { return r.EventsPerSecond })
	med := sorted[len(sorted)/2]
	med.Runs = runs
	med.RatioTTL = medianOf(runs, func(r MassRun) float64 { return r.RatioTTL })
	med.MedianCPUPerMillion = medianOf(runs, func(r MassRun) float64 { return r.CPUSecondsPerMillion })
	return med, nil
}

// runMassOnce is one mass expiry; settings go on top of the scenario's.
// A mass expiry silences a whole fleet on purpose: its signals topic is
// idle, so the storm guard finds no busy partition to hold — it runs with
// storm.max_hold 0 all the same, as every such benchmark should, and the
// storm-cost scenario measures it with the guard on.
func runMassOnce(ctx context.Context, o *options, run int, settings ...map[string]string) (*MassResult, error) {
	return runMassFamily(ctx, o, run, o.massDevices, nil, settings...)
}

// family is a gateway whose children are the devices of a mass expiry: it
// is due with them, and its timeout's arrival and children_held are kept.
type family struct {
	parent       string
	mu           sync.Mutex
	deadline     time.Time // the shared deadline
	parentAt     time.Time
	childrenHeld int64
	unreachable  int
	timeouts     int
}

// runMassFamily is runMassOnce for devices devices, children of fam's
// gateway when fam is not nil.
func runMassFamily(ctx context.Context, o *options, run, devices int, fam *family, settings ...map[string]string) (*MassResult, error) {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	kc, brokers, rp, st := infra.kc, infra.brokers, infra.rp, infra.st
	res := &MassResult{Devices: devices, Beneath: len(o.massTracked)}
	if len(o.massTracked) > 0 {
		// Due long after the run, spread over ten minutes: tracked, never
		// fired, under the due devices in every shard.
		status("mass: tracking %s devices due in an hour beneath the expiry", num(len(o.massTracked)))
		later, n := time.Now().Add(time.Hour).UnixMilli(), int64(len(o.massTracked))
		if _, err := loadDeadlines(ctx, st, o.shards, o.massTracked, func(k int) int64 { return later + int64(k)*600_000/n }); err != nil {
			return nil, err
		}
	}
	if run == 0 {
		res.Profile = o.profilePath("mass") // the first run's
	}
	// Firing needs a watermark: ingest is running (on an idle signals
	// topic) and its high-water-mark probe raises it every 20 ms.
	all := map[string]string{"storm.max_hold": "0s"}
	for _, s := range settings {
		maps.Copy(all, s)
	}
	fl, err := infra.serve(ctx, o, all, res.Profile)
	if err != nil {
		return nil, err
	}
	defer fl.Stop(15 * time.Second)

	// Uniqueness by the id's index, not a map of a million strings: the
	// consumer shares the machine with flatline and should cost it little.
	var mu sync.Mutex
	seen := make([]bool, devices)
	arrivals := make([]time.Time, 0, devices) // one per unique event
	received, foreign := 0, 0
	cons, err := startConsumer(brokers, kc.TimeoutsTopic, func(a arrival) {
		k, ok := idIndex("m-", a.key, devices)
		if fam != nil {
			fam.saw(a, ok)
		}
		mu.Lock()
		defer mu.Unlock()
		received++
		if !ok {
			foreign++
			return
		}
		if seen[k] {
			return
		}
		seen[k] = true
		arrivals = append(arrivals, a.at)
	})
	if err != nil {
		return nil, err
	}
	defer cons.Stop()

	ids := sample.DeviceIDs("m-", devices)
	deadline := time.Now().Add(o.massMargin)
	status("mass: %d devices, all due at +%s", devices, o.massMargin)
	due := func(int) int64 { return deadline.UnixMilli() }
	parent := ""
	if fam != nil {
		fam.mu.Lock()
		fam.deadline = deadline
		fam.mu.Unlock()
		parent = fam.parent
		if _, err := loadDeadlines(ctx, st, o.shards, []string{parent}, due); err != nil {
			return nil, err
		}
	}
	load, err := loadFamily(ctx, st, o.shards, ids, due, parent)
	if err != nil {
		return nil, err
	}
	res.LoadSeconds = load.Seconds()
	res.LoadEndBeforeDeadline = time.Until(deadline).Seconds()
	if res.LoadEndBeforeDeadline < 0 {
		status("mass: the load ended %.1fs after the deadline (raise -mass-margin)", -res.LoadEndBeforeDeadline)
	}
	time.Sleep(time.Until(deadline))
	cmdBefore, _ := rp.CommandStats(ctx)
	meter := newCPUMeter(map[string]int{"flatline": fl.PID, "redis": rp.PID, "bench+kfake": selfPID()})
	cpu0 := fl.Proc().CPU
	end := deadline.Add(o.massTimeout)
	var drained time.Time
	for {
		mu.Lock()
		n := len(arrivals)
		mu.Unlock()
		if drained.IsZero() {
			if left, err := st.Tracked(ctx, o.shards); err == nil && left <= int64(res.Beneath) {
				drained = time.Now()
			}
		}
		if n >= devices && !drained.IsZero() {
			res.Completed = true
			break
		}
		if time.Now().After(end) {
			status("mass: not drained within %s of the deadline", o.massTimeout)
			break
		}
		if exited, err := fl.Exited(); exited {
			return nil, fmt.Errorf("flatline exited: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ps := fl.Proc()
	res.WaitedSeconds = time.Since(deadline).Seconds()
	res.CPUSplit = meter.Split()
	if cmdAfter, err := rp.CommandStats(ctx); err == nil {
		res.RedisTop = topCommands(cmdBefore, cmdAfter, 5)
	}
	mu.Lock()
	defer mu.Unlock()
	res.Received, res.Unique, res.Unexpected = received, len(arrivals), foreign
	if len(arrivals) > 0 {
		res.FirstSeconds = arrivals[0].Sub(deadline).Seconds()
		last := arrivals[len(arrivals)-1]
		res.LastSeconds = last.Sub(deadline).Seconds()
		res.EventsPerSecond = float64(len(arrivals)) / res.LastSeconds
		// Best one-second window.
		j := 0
		for i := range arrivals {
			for arrivals[i].Sub(arrivals[j]) > time.Second {
				j++
			}
			res.PeakPerSecond = max(res.PeakPerSecond, float64(i-j+1))
		}
	}
	if !drained.IsZero() {
		res.DrainedSeconds = drained.Sub(deadline).Seconds()
	}
	res.RedisCPUUsecPer = perUnitUsec(res.CPUSplit["redis"], float64(res.Unique))
	res.CPUSeconds = (ps.CPU - cpu0).Seconds()
	if res.Unique > 0 {
		res.CPUSecondsPerMillion = res.CPUSeconds / (float64(res.Unique) / 1e6)
	}
	res.PeakRSSBytes = ps.PeakRSS
	return res, nil
}

// saw tallies an event of the family's run: the gateway's timeout, or a
// child's event by its type.
func (f *family) saw(a arrival, child bool) {
	var ev struct {
		Type         string `json:"type"`
		ChildrenHeld int64  `json:"children_held"`
	}
	if err := json.Unmarshal(a.value, &ev); err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case string(a.key) == f.parent:
		f.parentAt, f.childrenHeld = a.at, ev.ChildrenHeld
	case child && ev.Type == "unreachable":
		f.unreachable++
	case child:
		f.timeouts++
	}
}
