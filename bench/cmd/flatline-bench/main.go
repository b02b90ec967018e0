// Command flatline-bench measures flatline end to end on this machine, the
// scenarios of docs/performance.md, and prints a table and writes a JSON result under
// bench/results/ with the machine's description.
//
// Every scenario gets a fresh redis-server (a child process, never a Redis
// already running) and a fresh Kafka: franz-go's kfake, in this process,
// reached over TCP. flatline runs as a child process — this binary
// re-executed as `flatline-bench child`, which is `flatline serve`
// configured through FLATLINE_* variables — so its CPU time and peak RSS are
// its own. Load generators and consumers use franz-go.
//
//  1. ingest: a preloaded backlog of heartbeats; time from flatline's start
//     until the group lag is 0 and every device is tracked; the Redis
//     ceiling (variadic ZADD GT pipelined from Go into the same keys); the
//     same with ingest.coalesce_window. Then (scenario "wait") exact ingest
//     against a primary with one replica, redis.wait_replicas 0 and 1.
//  2. lateness: a large tracked fleet under a background reset load, a
//     sparse set of deadlines; event arrival − deadline. Then the same
//     under a trickle of resets (quiet partitions).
//  3. mass expiry: every device due at the same moment; drain rate.
//  4. memory: Redis bytes per device against a bare ZSET.
//  5. process cost: flatline's CPU and peak RSS, from scenarios 1 and 3.
//  6. peers: bench/peers (a separate module) run on a fresh redis-server.
//  7. micro: `go test -bench` output, when given with -micro.
//  8. shard cost (scenario "shard-cost"): one fleet on one instance with 16
//     shards and then with 4,096: flatline's and redis-server's CPU, Redis
//     commands/s, goroutines and detection lateness, and the ratios.
//  9. storm cost (scenario "storm-cost"): exact ingest and mass expiry with
//     the storm guard on and off (storm.max_hold 0), alternately.
//  10. maintenance cost (scenario "maintenance-cost"): exact ingest with
//     10,000 maintenance windows open and with none, alternately.
//  11. gateway cost (scenario "gateway-cost"): a dead gateway's 100,000
//     children against as many devices without a parent, Redis bytes per
//     child, exact ingest with a parent in every heartbeat and without.
//  12. growth (scenario "growth"): at tracked-fleet sizes of 100,000 to
//     10,000,000 devices, the ZADD GT ceiling and exact ingest over the
//     keyspace, lateness under load and under a trickle, a mass expiry on
//     top of the keyspace and Redis bytes per device.
//
// Usage (see `make bench`):
//
//	flatline-bench [-scenarios memory,ingest,wait,lateness,mass,shard-cost,storm-cost,maintenance-cost,gateway-cost,growth,peers] [-scale 0.5]
//	    [-peers bin/flatline-bench-peers] [-micro file] [-cpuprofile prefix] [-out bench/results]
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/runfile"
	"github.com/flatline-dev/flatline/internal/testenv/host"
)

type options struct {
	scenarios  string
	scale      float64
	out        string
	cpuprofile string
	markdown   bool
	partitions int
	shards     int

	ingestDevices    int
	ingestHeartbeats int
	coalesceWindow   time.Duration
	ceilingDuration  time.Duration
	monitorFile      string
	ingestPairs      int
	shapes           []string
	ingestTimeout    time.Duration

	latDevices int
	latRate    int
	latSparse  int
	latRuns    int
	latProbes  int
	latSpread  time.Duration

	massDevices int
	massMargin  time.Duration
	massTimeout time.Duration
	massRuns    int
	// massTracked are devices tracked beside a mass expiry's own, due long
	// after it: the keyspace the growth sweep drains on top of.
	massTracked []string

	memDevices int

	stormPairs int

	growthSizes []int
	growthPairs []int

	costShards  string
	costDevices int
	costSilent  int
	costWindow  time.Duration

	peersBin  string
	peersArgs string
	micro     string

	profiles []string
}

// The reference sizes, at which the targets of docs/performance.md are measured.
var referenceSizes = map[string]int{
	"ingest-devices": 200_000, "ingest-heartbeats": 2_000_000, "lat-devices": 1_000_000,
	"lat-rate": 100_000, "lat-probes": 2000, "mass-devices": 1_000_000, "mem-devices": 1_000_000,
}

var started = time.Now()

func status(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func selfPID() int { return os.Getpid() }

func (o *options) profilePath(name string) string {
	if o.cpuprofile == "" {
		return ""
	}
	p := o.cpuprofile + "-" + name + ".pprof"
	o.profiles = append(o.profiles, p)
	return p
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(runChild())
	}
	os.Exit(run())
}

func run() int {
	o := &options{}
	fs := flag.NewFlagSet("flatline-bench", flag.ExitOnError)
	fs.StringVar(&o.scenarios, "scenarios", "memory,ingest,wait,lateness,mass,shard-cost,storm-cost,maintenance-cost,gateway-cost,growth,peers", "comma-separated scenarios to run (peers needs -peers)")
	fs.Float64Var(&o.scale, "scale", 1, "multiply every device and heartbeat count (not rates) by this; the output says so")
	fs.StringVar(&o.out, "out", "bench/results", "directory for the JSON result (empty: none)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write CPU profiles to PREFIX-<scenario>.pprof (flatline) and PREFIX-bench.pprof (this process)")
	fs.BoolVar(&o.markdown, "markdown", false, "also print the table as Markdown")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of every topic")
	fs.IntVar(&o.shards, "shards", 16, "shards.initial_count")
	fs.IntVar(&o.ingestDevices, "ingest-devices", referenceSizes["ingest-devices"], "scenario 1: devices")
	fs.IntVar(&o.ingestHeartbeats, "ingest-heartbeats", referenceSizes["ingest-heartbeats"], "scenario 1: heartbeats (a multiple of the devices: one per device per second)")
	fs.DurationVar(&o.coalesceWindow, "coalesce", 10*time.Second, "scenario 1: ingest.coalesce_window of the second run (0: skip it)")
	fs.DurationVar(&o.ceilingDuration, "ceiling", 3*time.Second, "scenario 1: how long to measure the Redis ceiling, after each exact run")
	fs.StringVar(&o.monitorFile, "monitor", "", "scenario 1: after the pairs, one more exact run (not counted) whose Redis commands MONITOR writes to this file, for bench/cmd/zadd-order")
	shapes := fs.String("shapes", "emqx5,mqtt-topic", "scenario 1: exact ingest of the same fleet as bridges write it (emqx5, mqtt-topic; empty: none)")
	fs.IntVar(&o.ingestPairs, "ingest-pairs", 3, "scenario 1: exact runs, each followed by a ceiling measurement (the median ratio counts)")
	fs.DurationVar(&o.ingestTimeout, "ingest-timeout", 2*time.Minute, "scenario 1: give up on a run after this long")
	fs.IntVar(&o.latDevices, "lat-devices", referenceSizes["lat-devices"], "scenario 2: tracked devices")
	fs.IntVar(&o.latRate, "lat-rate", referenceSizes["lat-rate"], "scenario 2: background heartbeats per second")
	fs.IntVar(&o.latRuns, "lat-runs", 3, "scenario 2: runs under -lat-rate (the median p99 is shown; the target holds only if every run meets it)")
	fs.IntVar(&o.latSparse, "lat-sparse-rate", 8, "scenario 2: background heartbeats per second of a second run with quiet partitions (0: skip it)")
	fs.IntVar(&o.latProbes, "lat-probes", referenceSizes["lat-probes"], "scenario 2: deadlines measured")
	fs.DurationVar(&o.latSpread, "lat-spread", 10*time.Second, "scenario 2: window the deadlines are spread over")
	fs.IntVar(&o.massDevices, "mass-devices", referenceSizes["mass-devices"], "scenario 3: devices silent at once")
	fs.DurationVar(&o.massMargin, "mass-margin", 0, "scenario 3: time from the start of the load to the shared deadline (0: from the measured load rate)")
	fs.IntVar(&o.massRuns, "mass-runs", 3, "scenario 3: runs (the median by drain rate counts; all are listed)")
	fs.DurationVar(&o.massTimeout, "mass-timeout", 30*time.Second, "scenario 3: stop waiting this long after the deadline (the rate is then over what arrived)")
	fs.IntVar(&o.memDevices, "mem-devices", referenceSizes["mem-devices"], "scenario 4: devices")
	fs.IntVar(&o.stormPairs, "storm-pairs", 5, "storm cost: pairs of runs, guard on and off in turns, of exact ingest and of mass expiry (the medians count)")
	growthSizes := fs.String("growth-sizes", "100000,1000000,10000000", "growth: tracked-fleet sizes, devices (scaled by -scale)")
	growthPairs := fs.String("growth-pairs", "3,3,1", "growth: exact ingest / ceiling pairs at each size, in the order of -growth-sizes (the last count for the sizes beyond)")
	fs.StringVar(&o.costShards, "cost-shards", "16,4096", "shard cost: the shard counts, run in this order (the ratios are the last over the first)")
	fs.IntVar(&o.costDevices, "cost-devices", 2000, "shard cost: devices beating every second")
	fs.IntVar(&o.costSilent, "cost-silent", 20, "shard cost: devices going silent per second, with 1 s timeouts (the lateness sample)")
	fs.DurationVar(&o.costWindow, "cost-window", 20*time.Second, "shard cost: the measured window of each run")
	fs.StringVar(&o.peersBin, "peers", "", "the bench/peers binary (scenario 6)")
	fs.StringVar(&o.peersArgs, "peers-args", "", "extra arguments for the peers binary")
	fs.StringVar(&o.micro, "micro", "", "a `go test -bench` output file to include (scenario 7)")
	fs.Func("set", "key=value: a flatline setting for every run, over the scenario's own (repeatable; an experiment, not the reference configuration: the output says so)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-set %q: want key=value, e.g. scanner.batch_size=200", kv)
		}
		overrides[k] = v
		return nil
	})
	_ = fs.Parse(os.Args[1:])
	var err error
	if o.growthSizes, err = parseCounts(*growthSizes); err != nil {
		fmt.Fprintln(os.Stderr, "flatline-bench: -growth-sizes:", err)
		return 2
	}
	if o.growthPairs, err = parseCounts(*growthPairs); err != nil {
		fmt.Fprintln(os.Stderr, "flatline-bench: -growth-pairs:", err)
		return 2
	}
	for _, name := range strings.Split(*shapes, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		known := false
		for _, s := range benchShapes {
			known = known || s.name == name
		}
		if !known {
			fmt.Fprintf(os.Stderr, "flatline-bench: -shapes: unknown shape %q (emqx5, mqtt-topic)\n", name)
			return 2
		}
		o.shapes = append(o.shapes, name)
	}

	scaled := func(p *int) {
		if o.scale != 1 {
			*p = max(1, int(float64(*p)*o.scale))
		}
	}
	for _, p := range []*int{&o.ingestDevices, &o.ingestHeartbeats, &o.latDevices, &o.massDevices, &o.memDevices} {
		scaled(p)
	}
	for k := range o.growthSizes {
		scaled(&o.growthSizes[k])
	}
	o.latProbes = min(o.latProbes, o.latDevices)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if o.cpuprofile != "" {
		path := o.cpuprofile + "-bench.pprof"
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flatline-bench:", err)
			return 2
		}
		o.profiles = append(o.profiles, path)
		defer stopProfile()
	}

	res := &Result{
		Header: runfile.NewHeader(started.UTC().Format("2006-01-02T15:04:05Z")),
		Scale:  o.describeScale(),
		Set:    maps.Clone(overrides),
		Settings: map[string]string{
			"partitions": fmt.Sprint(o.partitions), "shards": fmt.Sprint(o.shards),
			"flatline": "defaults (configs.Default) unless a scenario says otherwise; heartbeats are JSON {device_id, ts}",
			"kafka":    "kfake (franz-go) in the bench process, over TCP; producers/consumers: franz-go, no compression",
		},
		Errors:      map[string]string{},
		LoadAverage: [2]float64{host.LoadAverage(), 0},
	}
	status("flatline-bench on %s (%d cores); %s", res.Machine.CPUModel, res.Machine.Cores, res.Scale)

	want := map[string]bool{}
	for _, s := range strings.Split(o.scenarios, ",") {
		want[strings.TrimSpace(s)] = true
	}
	runOne := func(name string, fn func() error) {
		if !want[name] || ctx.Err() != nil {
			return
		}
		t := time.Now()
		if err := fn(); err != nil {
			status("%s: FAILED: %v", name, err)
			res.Errors[name] = err.Error()
			return
		}
		status("%s: done in %.1fs", name, time.Since(t).Seconds())
	}
	runOne("memory", func() (err error) { res.Memory, err = runMemory(ctx, o); return })
	runOne("ingest", func() (err error) { res.Ingest, err = runIngest(ctx, o); return })
	runOne("wait", func() (err error) { res.Wait, err = runWait(ctx, o); return })
	runOne("lateness", func() (err error) {
		var runs []*LatenessResult
		for k := 0; k < max(1, o.latRuns); k++ {
			r, err := runLateness(ctx, o, o.latRate)
			if err != nil {
				return err
			}
			status("lateness: run %d: p99 %.1f ms, watermark lag p99 %.1f ms", k+1, r.Lateness.P99, r.WatermarkLag.P99)
			runs = append(runs, r)
		}
		res.Lateness = medianLateness(runs)
		if o.latSparse <= 0 {
			return nil
		}
		res.LatenessSparse, err = runLateness(ctx, o, o.latSparse)
		return
	})
	// The mass expiries (mass, storm-cost, gateway-cost) load their
	// devices due at one deadline, far enough ahead that the instance is
	// ready and every device loaded before it: a drain measured from a
	// deadline already past counts the load.
	massMargin := func() {
		if o.massMargin == 0 {
			rate := 300_000.0 // members/s through Store.Write, when memory did not run
			if res.Memory != nil && res.Memory.StoreWritesPerSec > 0 {
				rate = res.Memory.StoreWritesPerSec
			}
			o.massMargin = time.Second + time.Duration(1.5*float64(o.massDevices)/rate*float64(time.Second))
		}
	}
	runOne("mass", func() (err error) {
		massMargin()
		res.Mass, err = runMass(ctx, o)
		return
	})
	runOne("shard-cost", func() (err error) { res.ShardCost, err = runShardCost(ctx, o); return })
	runOne("storm-cost", func() (err error) { massMargin(); res.StormCost, err = runStormCost(ctx, o); return })
	runOne("maintenance-cost", func() (err error) { res.MaintenanceCost, err = runMaintenanceCost(ctx, o); return })
	runOne("gateway-cost", func() (err error) { massMargin(); res.GatewayCost, err = runGatewayCost(ctx, o); return })
	runOne("growth", func() (err error) { res.Growth, err = runGrowth(ctx, o); return })
	if o.peersBin != "" {
		runOne("peers", func() (err error) {
			var skip []string
			if res.Mass != nil && res.Mass.RatioTTL > 0 {
				skip = []string{"-mass-ttl", "0"} // measured beside every mass run
			}
			res.Peers, err = runPeers(ctx, o, skip...)
			return
		})
	}
	if o.micro != "" {
		micro, raw, err := readMicro(o.micro)
		if err != nil {
			res.Errors["micro"] = err.Error()
		}
		res.Micro = micro
		if o.out != "" && raw != "" {
			// benchstat reads the raw text.
			_ = os.MkdirAll(o.out, 0o755)
			name := strings.NewReplacer(":", "", "-", "").Replace(res.Run)
			_ = os.WriteFile(o.out+"/"+name+".micro.txt", []byte(raw), 0o644)
		}
	}
	res.DurationSeconds = time.Since(started).Seconds()
	res.LoadAverage[1] = host.LoadAverage()
	res.Profiles = o.profiles
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
	res.buildTable()
	res.printTable(os.Stdout)
	if o.markdown {
		fmt.Println()
		res.printMarkdown(os.Stdout)
	}
	if o.out != "" {
		path, err := res.write(o.out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flatline-bench:", err)
			return 1
		}
		fmt.Printf("\nresult: %s\n", path)
	}
	if len(o.profiles) > 0 {
		fmt.Printf("profiles: %s (go tool pprof -top <file>)\n", strings.Join(o.profiles, " "))
	}
	if ctx.Err() != nil || len(res.Errors) > 0 {
		return 1
	}
	return 0
}

// describeScale says how the sizes relate to the reference sizes.
func (o *options) describeScale() string {
	got := map[string]int{
		"ingest-devices": o.ingestDevices, "ingest-heartbeats": o.ingestHeartbeats, "lat-devices": o.latDevices,
		"lat-rate": o.latRate, "lat-probes": o.latProbes, "mass-devices": o.massDevices, "mem-devices": o.memDevices,
	}
	var diffs []string
	for _, k := range []string{"ingest-devices", "ingest-heartbeats", "lat-devices", "lat-rate", "lat-probes", "mass-devices", "mem-devices"} {
		if k == "mem-devices" && got[k] == 10_000_000 {
			continue // `make bench-large`'s size
		}
		if got[k] != referenceSizes[k] {
			diffs = append(diffs, fmt.Sprintf("%s %s (reference: %s)", k, num(got[k]), num(referenceSizes[k])))
		}
	}
	if !slices.Equal(o.growthSizes, growthReferenceSizes) {
		diffs = append(diffs, fmt.Sprintf("growth-sizes %s (reference: %s)", counts(o.growthSizes), counts(growthReferenceSizes)))
	}
	if len(diffs) == 0 {
		return "the reference sizes"
	}
	return "NOT the reference sizes: " + strings.Join(diffs, ", ")
}

// startCPUProfile writes a CPU profile of this process to the file path
// until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
