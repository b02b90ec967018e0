package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/runfile"
)

// Result is one run: what bench/results/<run>.json holds.
type Result struct {
	runfile.Header
	Scale string `json:"scale"`
	// Set holds the -set settings of an experiment (none: the reference
	// configuration).
	Set             map[string]string `json:"set,omitempty"`
	Settings        map[string]string `json:"settings"`
	DurationSeconds float64           `json:"duration_seconds"`
	// LoadAverage is /proc/loadavg's 1-minute figure before and after the
	// run: other work on the machine skews every figure.
	LoadAverage [2]float64    `json:"load_average_before_after"`
	Ingest      *IngestResult `json:"ingest,omitempty"`
	// Wait is scenario 1's exact ingest on a primary with a replica, with
	// redis.wait_replicas 0 and 1.
	Wait     *WaitResult     `json:"ingest_wait,omitempty"`
	Lateness *LatenessResult `json:"lateness,omitempty"`
	// LatenessSparse is scenario 2 again under a trickle of resets: most
	// fetches of the signals topic come back empty.
	LatenessSparse *LatenessResult  `json:"lateness_sparse,omitempty"`
	Mass           *MassResult      `json:"mass_expiry,omitempty"`
	ShardCost      *ShardCostResult `json:"shard_cost,omitempty"`
	StormCost      *StormCostResult `json:"storm_cost,omitempty"`
	// MaintenanceCost: exact ingest with 10,000 maintenance windows open
	// and with none.
	MaintenanceCost *MaintenanceCostResult `json:"maintenance_cost,omitempty"`
	// GatewayCost: a dead gateway's children, bytes per child and ingest
	// with parents, each against the same without parents.
	GatewayCost *GatewayCostResult `json:"gateway_cost,omitempty"`
	// Growth: the figures at tracked-fleet sizes of -growth-sizes.
	Growth   *GrowthResult     `json:"growth,omitempty"`
	Memory   *MemoryResult     `json:"memory,omitempty"`
	Peers    *PeersResult      `json:"peers,omitempty"`
	Micro    []MicroResult     `json:"micro,omitempty"`
	Errors   map[string]string `json:"errors,omitempty"`
	Table    []Row             `json:"table"`
	Profiles []string          `json:"cpu_profiles,omitempty"`
}

// Row is one line of the table.
type Row struct {
	Scenario string `json:"scenario"`
	Measure  string `json:"measure"`
	Value    string `json:"value"`
	Target   string `json:"target,omitempty"`
	Status   string `json:"status,omitempty"` // "met", "MISSED" or ""
}

func check(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// buildTable turns the results into rows.
func (r *Result) buildTable() {
	var t []Row
	add := func(sc, measure, value, target, st string) {
		t = append(t, Row{Scenario: sc, Measure: measure, Value: value, Target: target, Status: st})
	}
	if in := r.Ingest; in != nil {
		sc := "1 ingest"
		c := in.Ceiling
		if e := in.Exact; e != nil {
			add(sc, fmt.Sprintf("exact: %s heartbeats of %s devices, start → lag 0 and all tracked", num(in.Heartbeats), num(in.Devices)),
				fmt.Sprintf("%s hb/s (%.1f s)", num(e.HeartbeatsPerSecond), e.FromStartSeconds), "≥ 300,000 hb/s", check(e.Completed && e.HeartbeatsPerSecond >= 300_000))
			add(sc, "exact: after the first write (group join excluded)",
				fmt.Sprintf("%s hb/s (first write at %.1f s)", num(e.SteadyPerSecond), e.FirstWriteSeconds), "", "")
		}
		if c != nil {
			add(sc, fmt.Sprintf("Redis ceiling: ZADD GT ×%d pairs, %d-deep pipelines, %d conns", c.PairsPerCommand, c.PipelineDepth, c.Workers),
				num(c.MembersPerSecond)+" resets/s", "", "")
		}
		if in.Exact != nil && c != nil {
			var each []string
			for _, p := range in.Pairs {
				each = append(each, fmt.Sprintf("%.2f", p.Ratio))
			}
			label := "exact / ceiling"
			if len(in.Pairs) > 1 {
				label = fmt.Sprintf("exact / ceiling: median of %d pairs (%s)", len(in.Pairs), strings.Join(each, ", "))
			}
			add(sc, label, fmt.Sprintf("%.2f ×", in.RatioExact), "≥ 0.6 ×", check(in.RatioExact >= 0.6))
		}
		if co := in.Coalesced; co != nil {
			v := fmt.Sprintf("%s hb/s (%.1f s; %s Redis writes, %s coalesced)", num(co.HeartbeatsPerSecond), co.FromStartSeconds, num(co.RedisWrites), num(co.Coalesced))
			if co.Coalesced == 0 {
				v += " — coalescing had no effect in this build"
			}
			add(sc, fmt.Sprintf("%s, devices beating every 1 s", co.Mode), v, "", "")
			label := "coalesced / median ceiling"
			if len(in.CoalescedRuns) > 1 {
				var each []string
				for _, r := range in.CoalescedRuns {
					each = append(each, num(r.HeartbeatsPerSecond))
				}
				label = fmt.Sprintf("coalesced / median ceiling: median of %d runs (%s hb/s)", len(in.CoalescedRuns), strings.Join(each, ", "))
			}
			add(sc, label, fmt.Sprintf("%.2f ×", in.RatioCoalesced), "≥ 1.5 ×", check(co.Completed && in.RatioCoalesced >= 1.5))
		}
		for _, sh := range in.Shapes {
			var each []string
			for _, r := range sh.Runs {
				each = append(each, num(r.HeartbeatsPerSecond))
			}
			add(sc, fmt.Sprintf("%s shape / median ceiling: median of %d runs (%s hb/s)", sh.Shape, len(sh.Runs), strings.Join(each, ", ")),
				fmt.Sprintf("%.2f ×", sh.Ratio), fmt.Sprintf("≥ %.1f ×", sh.Target), check(sh.Median.Completed && sh.Ratio >= sh.Target))
		}
	}
	if w := r.Wait; w != nil {
		sc := "1 ingest, WAIT"
		add(sc, fmt.Sprintf("exact, primary + 1 replica: %s heartbeats of %s devices, redis.wait_replicas 0", num(w.Heartbeats), num(w.Devices)),
			fmt.Sprintf("%s hb/s (%.1f s)", num(w.NoWait.HeartbeatsPerSecond), w.NoWait.FromStartSeconds), "", "")
		add(sc, "the same with redis.wait_replicas 1 (every batch confirmed by WAIT)",
			fmt.Sprintf("%s hb/s (%.1f s)", num(w.Wait.HeartbeatsPerSecond), w.Wait.FromStartSeconds), "", "")
		add(sc, "wait_replicas 1 / 0", fmt.Sprintf("%.2f ×", w.Ratio), "", "")
	}
	for _, l := range []struct {
		sc string
		r  *LatenessResult
	}{{"2 lateness", r.Lateness}, {"2 lateness, sparse", r.LatenessSparse}} {
		sc, l := l.sc, l.r
		if l == nil {
			continue
		}
		add(sc, fmt.Sprintf("%s devices, %s resets/s load (ingested %s/s), %d deadlines over %s",
			num(l.Devices), num(l.BackgroundRate), num(l.BackgroundIngested), l.Probes, dur(l.SpreadSeconds)),
			fmt.Sprintf("%d/%d events", l.Received, l.Probes), "all", check(l.Received == l.Probes))
		add(sc, "arrival at consumer − deadline (≥ Kafka ack − deadline): p50 / p99 / max",
			fmt.Sprintf("%s / %s / %s ms", ms(l.Lateness.P50), ms(l.Lateness.P99), ms(l.Lateness.Max)), "p99 ≤ 30 ms", check(l.Received == l.Probes && l.Lateness.P99 <= 30))
		if len(l.Runs) > 1 {
			var each []string
			every := true
			for _, r := range l.Runs {
				each = append(each, fmt.Sprintf("%s (wm lag %s, kfake %s, stages %s, steal %.0f %%)", ms(r.P99Ms), ms(r.WatermarkLagP99), ms(r.BrokerRTTP99), r.Stages, 100*r.StealShare))
				every = every && r.Received == l.Probes && r.P99Ms <= 30
			}
			add(sc, fmt.Sprintf("the %d runs' p99 (median run above), ms", len(l.Runs)), strings.Join(each, "; "), "p99 ≤ 30 ms in every run", check(every))
		}
		if t := r.LatenessSparse; l == r.Lateness && t != nil && t.Lateness.P99 > 0 && len(l.Runs) > 0 {
			// The target that follows the machine: load may not make
			// detection more than twice as late as a trickle does in the
			// same run of the bench.
			var each []string
			every := t.Received == t.Probes
			for _, run := range l.Runs {
				ratio := run.P99Ms / t.Lateness.P99
				each = append(each, fmt.Sprintf("%.2f", ratio))
				every = every && run.Received == l.Probes && ratio <= latenessLoadRatio
			}
			add(sc, fmt.Sprintf("each run's p99 / the trickle's p99 (%s ms, below)", ms(t.Lateness.P99)), strings.Join(each, ", ")+" ×",
				fmt.Sprintf("≤ %.0f × in every run", latenessLoadRatio), check(every))
		}
		add(sc, "detected_at − deadline: p50 / p99 / max",
			fmt.Sprintf("%s / %s / %s ms", ms(l.Detected.P50), ms(l.Detected.P99), ms(l.Detected.Max)), "", "")
		add(sc, "flatline's histogram (deadline → Kafka ack) p99 bucket", "≤ "+ms(l.FlatlineAckP99Ms)+" ms", "", "")
		add(sc, "watermark lag (now − min wm), sampled every 20 ms: p50 / p99 / max",
			fmt.Sprintf("%s / %s / %s ms", ms(l.WatermarkLag.P50), ms(l.WatermarkLag.P99), ms(l.WatermarkLag.Max)), "", "")
		add(sc, "the bench's Kafka (kfake) answering ListOffsets, sampled every 20 ms: p50 / p99 / max",
			fmt.Sprintf("%s / %s / %s ms", ms(l.BrokerRTT.P50), ms(l.BrokerRTT.P99), ms(l.BrokerRTT.Max)), "", "")
		add(sc, "heartbeats' way to Redis, flatline's histograms, p99 buckets: Kafka's answer / flatline's queue / Redis write",
			l.Stages.String()+" ms", "", "")
		add(sc, "flatline process under the load: cores (CPU-s per s) / peak RSS",
			fmt.Sprintf("%.2f / %s", l.FlatlineCores, mib(l.FlatlinePeakRSSBytes)), "", "")
		if wall := l.CPUSplit["wall"]; wall > 0 {
			add(sc, "the machine in the window: other processes' cores / the hypervisor's steal",
				fmt.Sprintf("%.2f / %.1f %%", l.CPUSplit["others"]/wall, 100*stealShare(l.CPUSplit)), "", "")
		}
	}
	if m := r.Mass; m != nil {
		sc := "3 mass expiry"
		got := fmt.Sprintf("%s / %.2f s", num(m.Unique), m.LastSeconds)
		if !m.Completed {
			got = fmt.Sprintf("only %s by +%.0f s (last at +%.2f s)", num(m.Unique), m.WaitedSeconds, m.LastSeconds)
		}
		add(sc, fmt.Sprintf("%s devices due at once: unique events / deadline → last arrival", num(m.Devices)),
			got, "all within 7 s", check(m.Completed && m.LastSeconds <= 7))
		add(sc, "drain rate (devices / deadline → last event)", num(m.EventsPerSecond)+" events/s", "≥ 150,000/s", check(m.Completed && m.EventsPerSecond >= 150_000))
		if len(m.Runs) > 1 {
			var each []string
			for _, r := range m.Runs {
				each = append(each, fmt.Sprintf("%s/s +%.2f s", num(r.EventsPerSecond), r.LastSeconds))
			}
			add(sc, fmt.Sprintf("the %d runs (the median one above)", len(m.Runs)), strings.Join(each, "; "), "", "")
		}
		if m.RatioTTL > 0 {
			var each []string
			for _, r := range m.Runs {
				each = append(each, fmt.Sprintf("%s/s → %.2f", num(r.TTLPerSecond), r.RatioTTL))
			}
			add(sc, "flatline / Redis TTL keys drain, each pair on fresh servers: median of the runs' ratios (TTL keys' drain → ratio)",
				fmt.Sprintf("%.2f × (%s)", m.RatioTTL, strings.Join(each, "; ")), "≥ 1.5 ×", check(m.RatioTTL >= 1.5))
		}
		empty := fmt.Sprintf("+%.2f s", m.DrainedSeconds)
		if m.DrainedSeconds == 0 {
			empty = "not yet"
		}
		add(sc, "best 1 s window; first event; shards empty", fmt.Sprintf("%s/s; +%.2f s; %s", num(m.PeakPerSecond), m.FirstSeconds, empty), "", "")
	}
	if m := r.Memory; m != nil {
		sc := "4 memory"
		add(sc, fmt.Sprintf("Redis bytes per device at %s devices (ids like %q): flatline / bare ZSET", num(m.Devices), m.IDExample),
			fmt.Sprintf("%.1f / %.1f B", m.FlatlinePerDevice, m.BarePerDevice), "", "")
		add(sc, "flatline / bare", fmt.Sprintf("%.3f ×", m.Ratio), "≤ 1.15 ×", check(m.Ratio > 0 && m.Ratio <= 1.15))
	}
	if in := r.Ingest; in != nil && in.Exact != nil {
		sc := "5 process cost"
		e := in.Exact
		add(sc, "flatline (ingest) peak RSS, scenario 1 exact", mib(e.PeakRSSBytes), "", "")
		var each []string
		for _, p := range in.Pairs {
			each = append(each, fmt.Sprintf("%.2f", p.Exact.CPUSecondsPerMillion))
		}
		add(sc, fmt.Sprintf("flatline CPU-seconds per million heartbeats (exact): median of the runs (%s)", strings.Join(each, ", ")),
			fmt.Sprintf("%.2f s", in.MedianExactCPUPerMillion), "≤ 0.5 s", check(in.MedianExactCPUPerMillion > 0 && in.MedianExactCPUPerMillion <= 0.5))
		if co := in.Coalesced; co != nil {
			add(sc, "… with "+co.Mode+": CPU-s per million / peak RSS", fmt.Sprintf("%.2f s / %s", co.CPUSecondsPerMillion, mib(co.PeakRSSBytes)), "", "")
		}
		add(sc, "CPU-seconds during exact: flatline / redis / kfake+bench", cpuSplit(e.CPUSplit), "", "")
		if c := in.Ceiling; c != nil && c.RedisCPUUsecPer > 0 {
			add(sc, "redis-server CPU per reset: exact / the bare ZADD GT ceiling (median pair)", fmt.Sprintf("%.2f / %.2f µs%s", e.RedisCPUUsecPer, c.RedisCPUUsecPer, topLine(e.RedisTop, float64(in.Heartbeats))), "", "")
		}
	}
	if m := r.Mass; m != nil {
		var each []string
		for _, r := range m.Runs {
			each = append(each, fmt.Sprintf("%.2f", r.CPUSecondsPerMillion))
		}
		add("5 process cost", fmt.Sprintf("mass expiry: flatline CPU-s per million events, median of the runs (%s) / peak RSS", strings.Join(each, ", ")),
			fmt.Sprintf("%.2f s / %s", m.MedianCPUPerMillion, mib(m.PeakRSSBytes)), "≤ 1.5 s", check(m.MedianCPUPerMillion > 0 && m.MedianCPUPerMillion <= 1.5))
		if m.RedisCPUUsecPer > 0 {
			add("5 process cost", "mass expiry: redis-server CPU per fired event (median run)", fmt.Sprintf("%.2f µs%s", m.RedisCPUUsecPer, topLine(m.RedisTop, float64(m.Unique))), "", "")
		}
	}
	if c := r.StormCost; c != nil {
		sc := "9 storm cost"
		add(sc, fmt.Sprintf("exact ingest, guard on / off (hb/s on: %s; off: %s)", list(c.IngestOn), list(c.IngestOff)),
			fmt.Sprintf("%.3f ×", c.RatioIngest), fmt.Sprintf("≥ %.2f ×", stormCostTarget), check(c.RatioIngest >= stormCostTarget))
		add(sc, fmt.Sprintf("mass expiry, guard on / off (events/s on: %s; off: %s)", list(c.MassOn), list(c.MassOff)),
			fmt.Sprintf("%.3f ×", c.RatioMass), fmt.Sprintf("≥ %.2f ×", stormCostTarget), check(c.RatioMass >= stormCostTarget))
	}
	if c := r.MaintenanceCost; c != nil {
		add("10 maintenance cost", fmt.Sprintf("exact ingest after the first write, %s windows open / none (hb/s open: %s; none: %s)", num(float64(c.Windows)), list(c.Open), list(c.None)),
			fmt.Sprintf("%.3f ×", c.Ratio), fmt.Sprintf("≥ %.2f ×", maintCostTarget), check(c.Ratio >= maintCostTarget))
		add("10 maintenance cost", "the same from the instance's start (it loads the windows first)", fmt.Sprintf("%.3f ×", c.RatioFromStart), "(reported)", "")
	}
	if c := r.GatewayCost; c != nil {
		gc := "11 gateway cost"
		add(gc, fmt.Sprintf("%s children of a dead gateway: drain from its timeout / %s devices without a parent (events/s children: %s; plain: %s); last run %d unreachable, %d child timeouts, children_held %d",
			num(c.Children), num(c.Children), list(c.FamilyFromParent), list(c.Plain), c.Unreachable, c.ChildTimeouts, c.ChildrenHeld),
			fmt.Sprintf("%.3f ×", c.RatioDrain), fmt.Sprintf("≥ %.1f ×", gatewayDrainTarget), check(c.RatioDrain >= gatewayDrainTarget && c.ChildTimeouts == 0 && c.Unreachable == c.Children))
		add(gc, "flatline CPU per event, children / devices without a parent", fmt.Sprintf("%.2f ×", c.RatioCPU), "(reported)", "")
		add(gc, fmt.Sprintf("Redis bytes per child over a device without a parent (its parent's id: %d B)", c.ParentIDBytes),
			fmt.Sprintf("+%.1f B", c.BytesPerChild), fmt.Sprintf("≤ +%d B", c.ParentIDBytes+gatewayBytesTarget), check(c.BytesPerChild <= float64(c.ParentIDBytes+gatewayBytesTarget)))
		add(gc, fmt.Sprintf("exact ingest, a parent in every heartbeat / none (hb/s parents: %s; none: %s)", list(c.IngestParents), list(c.IngestPlain)),
			fmt.Sprintf("%.3f ×", c.RatioIngest), fmt.Sprintf("≥ %.1f ×", gatewayIngestTarget), check(c.RatioIngest >= gatewayIngestTarget))
	}
	if g := r.Growth; g != nil {
		g.growthRows(add)
	}
	if c := r.ShardCost; c != nil && len(c.Runs) > 1 {
		sc := "8 shard cost"
		base, last := c.Runs[0], c.Runs[len(c.Runs)-1]
		for _, run := range c.Runs {
			add(sc, fmt.Sprintf("%d shards: %s devices beating every 1 s (ingested %s/s), %d/s going silent with %s timeouts, over %s",
				run.Shards, num(c.Devices), num(run.HeartbeatsIn), c.SilentPerSecond, dur(float64(c.SilentTimeoutMs)/1e3), dur(c.WindowSeconds)),
				fmt.Sprintf("%d/%d timeouts", run.Received, run.Silent), "all, none of the fleet, no duplicate",
				check(run.Received == run.Silent && run.FleetTimeouts == 0 && run.Duplicates == 0))
			add(sc, fmt.Sprintf("%d shards: flatline / redis-server cores; Redis commands/s; goroutines", run.Shards),
				fmt.Sprintf("%.3f / %.3f; %s; %s", run.FlatlineCores, run.RedisCores, num(run.CommandsPerSecond), num(run.Goroutines)), "", "")
			add(sc, fmt.Sprintf("%d shards: arrival − deadline p50 / p99 / max (detected_at − deadline p99)", run.Shards),
				fmt.Sprintf("%s / %s / %s ms (%s ms)", ms(run.Lateness.P50), ms(run.Lateness.P99), ms(run.Lateness.Max), ms(run.Detected.P99)), "", "")
		}
		vs := fmt.Sprintf("%d / %d shards", last.Shards, base.Shards)
		add(sc, vs+": flatline CPU", fmt.Sprintf("%.2f ×", c.RatioFlatlineCPU), fmt.Sprintf("≤ %.1f ×", shardCostCPUTarget),
			check(c.RatioFlatlineCPU > 0 && c.RatioFlatlineCPU <= shardCostCPUTarget))
		add(sc, vs+": redis-server CPU", fmt.Sprintf("%.2f ×", c.RatioRedisCPU), fmt.Sprintf("≤ %.1f ×", shardCostCPUTarget),
			check(c.RatioRedisCPU > 0 && c.RatioRedisCPU <= shardCostCPUTarget))
		add(sc, vs+": detection lateness p99", fmt.Sprintf("%.2f ×", c.RatioLatenessP99), fmt.Sprintf("≤ %.1f ×", shardCostLatenessTarget),
			check(c.RatioLatenessP99 > 0 && c.RatioLatenessP99 <= shardCostLatenessTarget))
		add(sc, vs+": Redis commands/s", fmt.Sprintf("%.2f ×", c.RatioCommands), "", "")
	}
	if p := r.Peers; p != nil {
		for _, pr := range p.Rows {
			v := num(pr.Value)
			if pr.Unit != "" {
				v += " " + pr.Unit
			}
			add("6 "+pr.System, pr.Metric, v, "", "")
		}
	}
	for _, mr := range r.Micro {
		name := strings.TrimPrefix(mr.Name, "Benchmark")
		v := fmt.Sprintf("%s ns/op", num3(mr.Metrics["ns/op"]))
		if b, ok := mr.Metrics["B/op"]; ok {
			v += fmt.Sprintf(", %s B/op, %s allocs/op", num(b), num(mr.Metrics["allocs/op"]))
		}
		for unit, val := range mr.Metrics {
			if unit != "ns/op" && unit != "B/op" && unit != "allocs/op" && unit != "MB/s" {
				v += fmt.Sprintf(", %s %s", num3(val), unit)
			}
		}
		add("7 micro", strings.TrimPrefix(mr.Package, "github.com/flatline-dev/flatline/")+" "+name, v, "", "")
	}
	for name, e := range r.Errors {
		add(name, "FAILED", e, "", "MISSED")
	}
	r.Table = t
}

// printTable writes the table for a terminal.
func (r *Result) printTable(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "\nflatline-bench %s — %s, %d cores, %s RAM, %s, redis-server %s (%.0f s)\n",
		r.Run, m.CPUModel, m.Cores, gib(m.MemoryBytes), m.GoVersion, m.RedisVersion, r.DurationSeconds)
	fmt.Fprintf(w, "scale: %s\n", r.Scale)
	if len(r.Set) > 0 {
		fmt.Fprintf(w, "EXPERIMENT, settings over the scenarios' own: %v\n", r.Set)
	}
	fmt.Fprintf(w, "load average before/after: %.2f / %.2f", r.LoadAverage[0], r.LoadAverage[1])
	if r.LoadAverage[0] > 0.5 {
		fmt.Fprintf(w, "  (other work was running: figures are pessimistic)")
	}
	fmt.Fprintf(w, "\n\n")
	w1, w2, w3 := 0, 0, 0
	for _, row := range r.Table {
		w1 = max(w1, len([]rune(row.Scenario)))
		w2 = max(w2, len([]rune(row.Measure)))
		w3 = max(w3, len([]rune(row.Value)))
	}
	w2 = min(w2, 90)
	for _, row := range r.Table {
		target := row.Target
		if row.Status != "" {
			target += "  " + row.Status
		}
		fmt.Fprintf(w, "%s  %s  %s  %s\n", pad(row.Scenario, w1), pad(row.Measure, w2), pad(row.Value, w3), target)
	}
}

// printMarkdown writes the table as Markdown (for the README).
func (r *Result) printMarkdown(w io.Writer) {
	fmt.Fprintln(w, "| scenario | measure | measured | target |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, row := range r.Table {
		target := row.Target
		if row.Status != "" {
			target += " " + map[string]string{"met": "✅", "MISSED": "❌ missed"}[row.Status]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.Scenario, strings.ReplaceAll(row.Measure, "|", "\\|"), row.Value, strings.TrimSpace(target))
	}
}

func (r *Result) write(dir string) (string, error) {
	return runfile.Write(dir, strings.NewReplacer(":", "", "-", "").Replace(r.Run)+".json", r)
}

func pad(s string, n int) string {
	if k := len([]rune(s)); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// num formats with thousands separators and no decimals (or two for
// small values).
func num[T int | int64 | float64](v T) string {
	f := float64(v)
	if math.Abs(f) < 10 && f != math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// num3 keeps three significant digits for small values.
func num3(v float64) string {
	if math.Abs(v) >= 1000 {
		return num(v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func ms(v float64) string {
	if math.Abs(v) >= 100 {
		return num(v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func dur(s float64) string { return (time.Duration(s * float64(time.Second))).String() }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func cpuSplit(m map[string]float64) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f s of %.1f s wall", m["flatline"], m["redis"], m["bench+kfake"], m["wall"])
}

// topLine is Redis's busiest commands in µs per unit (commandstats;
// commands a script calls count in the script's time and their own).
func topLine(top []RedisCommand, units float64) string {
	if len(top) == 0 || units <= 0 {
		return ""
	}
	var each []string
	for _, c := range top[:min(4, len(top))] {
		each = append(each, fmt.Sprintf("%s %.2f", c.Command, c.Seconds*1e6/units))
	}
	return "; commandstats µs per unit: " + strings.Join(each, ", ")
}

// list is v's figures, comma-separated.
func list(v []float64) string {
	out := ""
	for k, x := range v {
		if k > 0 {
			out += ", "
		}
		out += num(x)
	}
	return out
}
