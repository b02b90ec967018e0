package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

const mib = 1 << 20

// resource is one thing an instance holds, with the bound on its slope.
//
// The bounds are per hour over the second half: 10 minutes of the default
// 20-minute run, 60 samples per instance. They weigh what a leak tied to
// the platform's traffic would show against what such a window cannot
// resolve. Per instance an hour brings 720 /healthz, 720 /readyz, 240
// /metrics and 1,800 /status calls, each on a new connection: a leak of one
// goroutine or file per hundred of them is tens per hour. What a window
// cannot resolve is a step: a connection opened once and kept (a pool
// filling up to its size, which the soak allows) in the middle of a
// window of length T is a least-squares slope of 1.5/T, 9/h over 10
// minutes; and a goroutine or connection in flight at a sample scatters
// the slope by several per hour. The bounds let one such step pass and
// fail two. (A shorter run's window makes one step steeper: 60/h over the
// 90 s of a 3-minute run, whose verdicts are for trying the soak out.)
var resources = []resource{
	// The leak test allows 20 goroutines of noise after 1,000 probes; a leak
	// of one per /status call would be 1,800/h, one per hundred 18/h. A
	// kept connection brings a goroutine or two (kafka-go's reader).
	{key: "goroutines", unit: "", bound: 20, get: func(s procSample) float64 { return s.Goroutines }},
	// Every connection is a file: a kept Kafka and a kept Redis connection
	// are two steps (18/h); 20/h is also one leaked file per 175 probes.
	{key: "fds", unit: "", bound: 20, get: func(s procSample) float64 { return float64(s.FDs) }},
	// Kafka and Redis pools are sized at start and may fill up to their
	// size, never past it: one step (9/h) passes, two do not.
	{key: "kafka_conns", unit: "", bound: 10, get: func(s procSample) float64 { return float64(s.KafkaConns) }},
	{key: "redis_conns", unit: "", bound: 10, get: func(s procSample) float64 { return float64(s.RedisConns) }},
	// The heap's verdict is on the GC's goal (go_memstats_next_gc_bytes):
	// twice the heap live after the last collection at GOGC 100 (which
	// the soak sets, turning serve's heap floor off), so 10
	// MiB/h is 5 MiB/h of live heap, 120 MiB a day. heap_alloc, sampled
	// at a random point of its sawtooth between the live heap and the
	// goal, scatters by several MiB; over 10 minutes its slope is
	// uncertain by several MiB/h, more than the bound, so it is reported
	// beside and judged by no verdict of its own.
	{key: "heap_goal", unit: "MiB", scale: mib, bound: 10, get: func(s procSample) float64 { return s.HeapGoal }},
	{key: "heap_alloc", unit: "MiB", scale: mib, info: true, get: func(s procSample) float64 { return s.HeapAlloc }},
	// The resident set follows the heap goal, lagging: the runtime hands
	// freed pages back to the OS slowly. 10 MiB/h would fill a 256 MiB
	// pod limit in a day.
	{key: "rss", unit: "MiB", scale: mib, bound: 10, get: func(s procSample) float64 { return float64(s.RSS) }},
}

// connectedClientsBound is the bound on Redis' connected_clients, both
// instances and this program together: the same reasoning as their pools.
const connectedClientsBound = 10

type resource struct {
	key   string
	unit  string
	scale float64 // divides the sampled value for display; 0 is 1
	bound float64 // most slope per hour, in unit
	info  bool    // reported without a verdict
	get   func(procSample) float64
}

// slope is one resource's trend over the second half.
type slope struct {
	Resource string  `json:"resource"`
	Slot     string  `json:"slot,omitempty"`
	Instance string  `json:"instance,omitempty"`
	Unit     string  `json:"unit,omitempty"`
	N        int     `json:"samples"`
	First    float64 `json:"first"`
	Last     float64 `json:"last"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	PerHour  float64 `json:"slope_per_hour"`
	SE       float64 `json:"slope_se_per_hour"`
	Bound    float64 `json:"bound_per_hour,omitempty"`
	// Verdict is pass, FAIL, info (no verdict), or FAIL when too few
	// samples allow no slope.
	Verdict string `json:"verdict"`
	// Before is the median of the same process before the rebalances and
	// the scaling (after its own start had settled), Median the window's:
	// what those disturbances left behind, for information (a process
	// may own more or fewer shards after them).
	Before  float64 `json:"median_before_rebalances"`
	BeforeN int     `json:"samples_before_rebalances"`
	Median  float64 `json:"median_window"`
	// WholeWindow says the samples are of one process that lived through
	// the whole window.
	WholeWindow bool   `json:"whole_window"`
	Note        string `json:"note,omitempty"`
}

func (s slope) failed() bool { return s.Verdict == "FAIL" }

// scatterNote marks a slope whose standard error is over half its bound:
// the verdict stands, but the window was too short (or the samples too
// scattered) to say much.
const scatterNote = "standard error over half the bound (a longer run would tell more)"

// minSlopeSamples is the fewest samples a slope is judged on.
const minSlopeSamples = 5

// judge fits ys against ts (seconds since the window's start) in units per
// hour.
func judge(name, unit string, scale, bound float64, info bool, ts, ys []float64) slope {
	scale = scaleOf(scale)
	s := slope{Resource: name, Unit: unit, N: len(ys), Bound: bound}
	if len(ys) == 0 {
		s.Verdict, s.Note = "FAIL", "no samples"
		return s
	}
	hs := make([]float64, len(ts))
	vs := make([]float64, len(ys))
	for i := range ts {
		hs[i] = ts[i] / 3600
		vs[i] = ys[i] / scale
	}
	f := leastSquares(hs, vs)
	s.First, s.Last = vs[0], vs[len(vs)-1]
	s.Min, s.Max = slices.Min(vs), slices.Max(vs)
	s.PerHour, s.SE = f.Slope, f.SE
	s.Median = median(vs)
	if math.IsNaN(s.SE) {
		s.SE = 0
	}
	switch {
	case info:
		s.Verdict = "info"
	case len(ys) < minSlopeSamples:
		s.Verdict, s.Note = "FAIL", fmt.Sprintf("%d samples: too few for a slope", len(ys))
	case s.PerHour <= bound:
		s.Verdict = "pass"
	default:
		s.Verdict = "FAIL"
	}
	if !info && s.SE > bound/2 {
		s.Note = scatterNote
	}
	return s
}

// median is the middle value of vs (the mean of the two middle ones).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// slopes judges every resource of every slot over [from, to], using the
// samples of the slot's last process, and says whether that process lived
// through the whole window (it should: the restarts are in the first half).
// before is the span, in seconds, between the restarts and the first
// rebalance, for each resource's median there.
func slopes(procs []procSample, redis []redisSample, from, to time.Duration, period time.Duration, before [2]float64) []slope {
	var out []slope
	for _, slot := range []string{"a", "b"} {
		var in []procSample
		for _, p := range procs {
			if p.Slot == slot && p.Err == "" && p.T >= from.Seconds() && p.T <= to.Seconds() {
				in = append(in, p)
			}
		}
		// The last process's samples only: a process that died in the
		// window (which the plan never causes) leaves the rest.
		whole := true
		if len(in) > 0 {
			last := in[len(in)-1].ID
			var keep []procSample
			for _, p := range in {
				if p.ID == last {
					keep = append(keep, p)
				}
			}
			whole = len(keep) == len(in) && keep[0].T <= from.Seconds()+period.Seconds()*1.5
			in = keep
		}
		for _, r := range resources {
			var ts, ys []float64
			for _, p := range in {
				ts = append(ts, p.T-from.Seconds())
				ys = append(ys, r.get(p))
			}
			s := judge(r.key, r.unit, r.scale, r.bound, r.info, ts, ys)
			s.Slot, s.WholeWindow = slot, whole
			if len(in) > 0 {
				s.Instance = in[0].ID
				var bs []float64
				for _, p := range procs {
					if p.ID == s.Instance && p.Err == "" && p.T >= before[0] && p.T < before[1] {
						bs = append(bs, r.get(p)/scaleOf(r.scale))
					}
				}
				s.Before, s.BeforeN = median(bs), len(bs)
			}
			if !whole {
				s.Note = "the process did not live through the whole window: " + s.Note
			}
			out = append(out, s)
		}
	}
	var ts, ys, bs []float64
	for _, r := range redis {
		if r.Err != "" {
			continue
		}
		if r.T >= from.Seconds() && r.T <= to.Seconds() {
			ts = append(ts, r.T-from.Seconds())
			ys = append(ys, float64(r.ConnectedClients))
		}
		if r.T >= before[0] && r.T < before[1] {
			bs = append(bs, float64(r.ConnectedClients))
		}
	}
	s := judge("redis_connected_clients", "", 1, connectedClientsBound, false, ts, ys)
	s.WholeWindow = true
	s.Before, s.BeforeN = median(bs), len(bs)
	return append(out, s)
}

func scaleOf(scale float64) float64 {
	if scale == 0 {
		return 1
	}
	return scale
}
