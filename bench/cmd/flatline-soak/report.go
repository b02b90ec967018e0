package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/runfile"
	"github.com/flatline-dev/flatline/internal/testenv/host"
)

// Result is the JSON written to bench/results/soak-<UTC time>.json.
type Result struct {
	runfile.Header
	Settings map[string]string `json:"settings"`
	Duration float64           `json:"duration_s"`
	// Window is the second half the slopes are fitted over, in seconds
	// since the soak's start.
	Window   [2]float64 `json:"window_s"`
	PlanNote string     `json:"plan_note"`
	Steps    []step     `json:"disturbances"`
	Skipped  string     `json:"skipped,omitempty"`
	Windows  []window   `json:"restart_windows"`
	Exits    []exit     `json:"exits"`

	Fleet    fleetReport                      `json:"fleet"`
	Probes   map[string]map[string]probeCount `json:"probes"`
	Slopes   []slope                          `json:"slopes"`
	Cores    map[string]float64               `json:"flatline_cores_second_half"`
	Timeouts timeoutsVerdict                  `json:"timeouts"`
	Samples  []procSample                     `json:"samples"`
	Redis    []redisSample                    `json:"redis_samples"`
	Failures []string                         `json:"failures"`
	Pass     bool                             `json:"pass"`
	LoadAvg  [2]float64                       `json:"load_average_1m_start_end"`
}

type fleetReport struct {
	fleetCounts
	Heartbeats   int64   `json:"heartbeats_acked"`
	Failed       int64   `json:"produce_failures"`
	Tombstones   int64   `json:"tombstones_acked"`
	MaxAckLagMs  float64 `json:"max_ack_lag_ms"`
	MaxTickLagMs float64 `json:"max_tick_lag_ms"`
	BeatsPerSec  float64 `json:"heartbeats_per_s"`
	StarvedWarn  string  `json:"starved,omitempty"`
	ChurnEveryS  float64 `json:"churn_every_s"`
	Churn        [3]int  `json:"churn_join_leave_silence"`
}

var loadAtStart = host.LoadAverage()

func newResult(o options, p *plan, f *fleet, rd *reader, smp *sampler, probers map[string]*prober, t0, ended time.Time) *Result {
	r := &Result{
		Header: runfile.NewHeader(t0.UTC().Format("20060102T150405Z")),
		Settings: map[string]string{
			"devices": fmt.Sprint(o.devices), "interval": o.interval.String(), "timeout": o.timeout.String(),
			"partitions": fmt.Sprint(o.partitions), "shards": fmt.Sprint(o.shards),
			"flatline": o.flatline + " serve, configs defaults but " + settingsLine(p.settings),
			"kafka":    "kfake (franz-go) in this process over TCP, group session timeout floor 6 s; fleet producer and timeouts reader: franz-go",
			"probes":   "per instance, a new connection each: /healthz and /readyz every 5s, /metrics every 15s, /status every 2s",
		},
		Duration: ended.Sub(t0).Seconds(),
		LoadAvg:  [2]float64{loadAtStart, host.LoadAverage()},
	}
	p.mu.Lock()
	r.Steps, r.Windows, r.Exits, r.Skipped = slices.Clone(p.steps), slices.Clone(p.windows), slices.Clone(p.exits), p.skipped
	lastEnd, stepErr := p.lastEnd, p.stepError
	p.mu.Unlock()

	// The window opens at half time, or once the last disturbance has
	// settled if it ran late.
	from := o.duration / 2
	if !lastEnd.IsZero() {
		from = max(from, lastEnd.Add(o.settle).Sub(t0))
	}
	to := ended.Sub(t0)
	r.Window = [2]float64{from.Seconds(), to.Seconds()}
	r.PlanNote = fmt.Sprintf("every restart, rebalance and scale ran in the first half (last done at %.0fs); "+
		"the slopes are over %.0fs..%.0fs, per slot, of the processes that lived through all of it",
		lastEnd.Sub(t0).Seconds(), r.Window[0], r.Window[1])

	procs, redis := smp.samples()
	r.Samples, r.Redis = procs, redis
	r.Slopes = slopes(procs, redis, from, to, o.sampleEvery, beforeRebalances(r.Windows))
	r.Cores = cores(procs, from, to)

	c := f.counts()
	r.Fleet = fleetReport{fleetCounts: c, Heartbeats: f.sent.Load(), Failed: f.failed.Load(), Tombstones: f.tombstones.Load(),
		MaxAckLagMs:  float64(f.maxAckLag.Load()) / 1e6,
		MaxTickLagMs: float64(f.maxTickLag.Load()) / 1e6,
		BeatsPerSec:  float64(f.sent.Load()) / r.Duration,
		ChurnEveryS:  o.churnEvery.Seconds(), Churn: [3]int{o.joinN, o.leaveN, o.silenceN}}
	if lag := time.Duration(f.maxAckLag.Load() + f.maxTickLag.Load()); lag > o.timeout-o.interval {
		r.Fleet.StarvedWarn = fmt.Sprintf("the fleet itself fell %s behind at worst: a live device's timeout could be the machine's, not flatline's", lag.Round(time.Millisecond))
	}

	r.Probes = map[string]map[string]probeCount{}
	for slot, pr := range probers {
		var ws []window
		for _, w := range r.Windows {
			if w.Slot == slot {
				ws = append(ws, w)
			}
		}
		r.Probes[slot] = pr.counts(ws)
	}

	events, bad := rd.snapshot()
	r.Timeouts = checkTimeouts(f.devices(), events, bad, o.timeout, r.Windows)

	// The verdicts.
	for _, s := range r.Slopes {
		if s.failed() {
			r.Failures = append(r.Failures, fmt.Sprintf("%s %s: %+.1f%s/h (bound %.0f) %s", s.Resource, s.Slot, s.PerHour, s.Unit, s.Bound, s.Note))
		}
	}
	if !r.Timeouts.Pass {
		t := r.Timeouts
		r.Failures = append(r.Failures, fmt.Sprintf("timeouts: %d false, %d missed, %d repeated outside restart windows, %d recovered, %d undecodable",
			t.falseCount(), t.Missed, t.RepeatedOutside, t.Recovered, t.Undecodable))
	}
	for _, e := range r.Exits {
		if e.Code != 0 || e.Error != "" {
			r.Failures = append(r.Failures, fmt.Sprintf("%s stopped with exit %d %s", e.ID, e.Code, e.Error))
		}
	}
	if stepErr != nil {
		r.Failures = append(r.Failures, "disturbance: "+stepErr.Error())
	}
	if got, want := to-from, o.duration/3; got < want {
		r.Failures = append(r.Failures, fmt.Sprintf("the disturbances ran late: the steady window is %s, less than a third of the run", got.Round(time.Second)))
	}
	if r.Fleet.Failed > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("fleet: %d records failed to produce", r.Fleet.Failed))
	}
	r.Pass = len(r.Failures) == 0
	return r
}

// fullWindow is the second half of the default run, which the bounds are
// set for.
const fullWindow = 10 * time.Minute

// beforeRebalances is the span, in seconds since the start, from the end
// of the rolling restart (and its grace) to the third instance's start:
// the restarted processes, settled, before any rebalance.
func beforeRebalances(ws []window) [2]float64 {
	var b [2]float64
	for _, w := range ws {
		switch {
		case w.Kind == "restart":
			b[0] = max(b[0], w.ToS)
		case w.Kind == "start" && w.Slot == "c":
			b[1] = w.FromS
		}
	}
	return b
}

func settingsLine(s map[string]string) string {
	var kv []string
	for _, k := range []string{"timeouts.default", "shards.initial_count", "log.level"} {
		kv = append(kv, k+"="+s[k])
	}
	return strings.Join(kv, " ")
}

// cores is each slot's CPU use over the window, in cores.
func cores(procs []procSample, from, to time.Duration) map[string]float64 {
	out := map[string]float64{}
	for _, slot := range []string{"a", "b"} {
		var first, last *procSample
		for i := range procs {
			p := &procs[i]
			if p.Slot != slot || p.Err != "" || p.T < from.Seconds() || p.T > to.Seconds() {
				continue
			}
			if first == nil || first.ID != p.ID {
				first = p
			}
			last = p
		}
		if first != nil && last != first && last.T > first.T {
			out[slot] = (last.CPUSeconds - first.CPUSeconds) / (last.T - first.T)
		}
	}
	return out
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nflatline soak %s: %.0fs on %s (%d cores), load %.1f -> %.1f\n",
		r.Run, r.Duration, r.Machine.CPUModel, r.Machine.Cores, r.LoadAvg[0], r.LoadAvg[1])
	fmt.Fprintf(w, "plan: %s\n", r.PlanNote)
	for _, s := range r.Steps {
		e := ""
		if s.Err != "" {
			e = "  ERROR " + s.Err
		}
		fmt.Fprintf(w, "  %6.0fs-%4.0fs  %s: %s%s\n", s.StartS, s.EndS, s.Name, s.Detail, e)
	}
	if r.Skipped != "" {
		fmt.Fprintf(w, "  skipped: %s\n", r.Skipped)
	}
	fl := r.Fleet
	fmt.Fprintf(w, "fleet: %d started + %d joined; at the end %d live, %d silent, %d left (tombstoned); %.0f heartbeats/s acked, %d failed; worst ack lag %.0f ms, tick lag %.0f ms\n",
		fl.Started, fl.Joined, fl.Live, fl.Silent, fl.Left, fl.BeatsPerSec, fl.Failed, fl.MaxAckLagMs, fl.MaxTickLagMs)
	if fl.StarvedWarn != "" {
		fmt.Fprintf(w, "  warning: %s\n", fl.StarvedWarn)
	}
	fmt.Fprintf(w, "flatline cores over the window: a %.3f, b %.3f\n", r.Cores["a"], r.Cores["b"])

	fmt.Fprintf(w, "\nslopes over %.0fs..%.0fs (least squares, per hour):\n", r.Window[0], r.Window[1])
	if r.Window[1]-r.Window[0] < fullWindow.Seconds()*0.9 {
		fmt.Fprintf(w, "  (a %.0fs window: the bounds are set for the %s window of a 20-minute run; over a shorter one a step or a little scatter is a steep slope)\n",
			r.Window[1]-r.Window[0], fullWindow)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "resource\tslot\tinstance\tn\tmedian before→window\tfirst\tlast\tslope/h\t±se\tbound/h\tverdict\t")
	for _, s := range r.Slopes {
		bound := fmt.Sprintf("%.0f", s.Bound)
		if s.Verdict == "info" {
			bound = "-"
		}
		before := "-"
		if s.BeforeN > 0 {
			before = fmt.Sprintf("%.1f", s.Before)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s → %.1f\t%.1f\t%.1f\t%+.2f\t%.2f\t%s\t%s\t\n",
			s.Resource+unitSuffix(s.Unit), s.Slot, s.Instance, s.N, before, s.Median, s.First, s.Last, s.PerHour, s.SE, bound, s.Verdict)
	}
	_ = tw.Flush()
	var scattered []string
	for _, s := range r.Slopes {
		switch {
		case s.Verdict == "info":
		case s.Note == scatterNote:
			scattered = append(scattered, strings.TrimSpace(s.Resource+" "+s.Slot))
		case s.Note != "":
			fmt.Fprintf(w, "  note %s %s: %s\n", s.Resource, s.Slot, s.Note)
		}
	}
	if len(scattered) > 0 {
		fmt.Fprintf(w, "  %s: %s\n", scatterNote, strings.Join(scattered, ", "))
	}

	t := r.Timeouts
	fmt.Fprintf(w, "\ntimeouts (independent reader): %d events, %d timeouts, %d storm, %d recovered\n", t.Events, t.Timeouts, t.Storm, t.Recovered)
	fmt.Fprintf(w, "  silent devices %d: fired once %d, repeated (same event_id) in restart windows %d, repeated outside %d, missed %d\n",
		t.Silent, t.FiredOnce, t.Repeated, t.RepeatedOutside, t.Missed)
	fmt.Fprintf(w, "  false: %d (live %d, tombstoned %d, unknown %d, wrong deadline %d)\n",
		t.falseCount(), t.FalseLive, t.FalseLeft, t.FalseUnknown, t.FalseWrongDeadline)
	fmt.Fprintf(w, "  lateness from deadline to the reader: %s\n", t.Lateness)
	for _, e := range t.Examples {
		fmt.Fprintf(w, "  - %s\n", e)
	}
	fmt.Fprintln(w, "\nprobes (ok / failed / failed outside restart windows):")
	for _, slot := range []string{"a", "b", "c"} {
		ps, ok := r.Probes[slot]
		if !ok {
			continue
		}
		var parts []string
		for _, pr := range platformProbes {
			c := ps[pr.path]
			parts = append(parts, fmt.Sprintf("%s %d/%d/%d", pr.path, c.OK, c.Failed, c.FailedOutside))
		}
		fmt.Fprintf(w, "  %s: %s\n", slot, strings.Join(parts, "  "))
	}
	fmt.Fprint(w, "exits:")
	for _, e := range r.Exits {
		fmt.Fprintf(w, " %s=%d", e.ID, e.Code)
	}
	fmt.Fprintln(w)
	if r.Pass {
		fmt.Fprintln(w, "\nverdict: PASS")
		return
	}
	fmt.Fprintln(w, "\nverdict: FAIL")
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " (" + u + ")"
}

// write saves the result as dir/soak-<run>.json.
func (r *Result) write(dir string) (string, error) {
	return runfile.Write(dir, "soak-"+r.Run+".json", r)
}
