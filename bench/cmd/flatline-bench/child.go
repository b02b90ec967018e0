package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/bench/internal/prefix"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/internal/heapfloor"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/testenv/host"
)

// The flatline under test runs in a child process: this binary re-executed
// with the argument "child". The child is exactly `flatline serve` (configs
// loaded from FLATLINE_* variables, app.New, app.Run until SIGTERM), so its
// CPU time and peak RSS are flatline's alone, not mixed with the in-process
// Kafka (kfake) and the load generators that live in the parent.
const (
	childArg        = "child"
	childProfileEnv = "FLATLINE_BENCH_CHILD_CPUPROFILE" // not a config key: removed before loading
)

// runChild is the child's main.
func runChild() int {
	profile := os.Getenv(childProfileEnv)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, childProfileEnv+"=") {
			env = append(env, kv)
		}
	}
	cfg, err := configs.Load(configs.LoadOptions{Env: env})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
		return 2
	}
	if profile != "" {
		stopProfile, err := startCPUProfile(profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
			return 2
		}
		defer stopProfile()
	}
	// As flatline serve does.
	if f := heapfloor.Start(heapfloor.Default); f != nil {
		defer f.Stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := logging.New(cfg.Log, os.Stderr)
	a, err := app.New(ctx, *cfg, log, app.Hooks{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
		return 1
	}
	return 0
}

// flatlineProc is a running child.
type flatlineProc struct {
	proc     *testenv.Process
	PID      int
	HTTPAddr string
	Started  time.Time
}

// overrides are the -set settings: applied to every child over the
// scenario's own.
var overrides = map[string]string{}

// startFlatline starts the child with the given configuration settings
// (key path -> value, as FLATLINE_* variables take them), then -set's.
func startFlatline(settings map[string]string, profile string) (*flatlineProc, error) {
	maps.Copy(settings, overrides)
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if _, ok := settings["http.addr"]; !ok {
		port, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		settings["http.addr"] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	cmd := exec.Command(self, childArg)
	// The parent's FLATLINE_* variables stay out: a developer's own
	// settings must not leak into the measured process.
	cmd.Env = testenv.SettingsEnv(settings)
	if profile != "" {
		cmd.Env = append(cmd.Env, childProfileEnv+"="+profile)
	}
	cmd.Stdout = os.Stderr
	cmd.Stderr = prefix.NewWriter(os.Stderr, "  flatline| ")
	started := time.Now()
	proc, err := testenv.StartProcess(cmd)
	if err != nil {
		return nil, err
	}
	return &flatlineProc{proc: proc, PID: proc.Pid(), HTTPAddr: settings["http.addr"], Started: started}, nil
}

// Proc reads the child's CPU time and peak RSS.
func (p *flatlineProc) Proc() host.Proc { return host.ReadProc(p.PID) }

// Exited reports whether the child has exited, with its error.
func (p *flatlineProc) Exited() (bool, error) {
	if !p.proc.Exited() {
		return false, nil
	}
	return true, p.proc.Err()
}

// Stop sends SIGTERM and waits for a graceful exit (killing it after
// timeout).
func (p *flatlineProc) Stop(timeout time.Duration) error {
	if _, inTime := p.proc.Stop(timeout); !inTime {
		return fmt.Errorf("flatline did not stop within %s; killed", timeout)
	}
	return p.proc.Err()
}

// Metrics scrapes the child's /metrics.
func (p *flatlineProc) Metrics(ctx context.Context) (e2etest.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return e2etest.ScrapeMetricsWith(ctx, http.DefaultClient, "http://"+p.HTTPAddr+"/metrics")
}

// sumMetric adds every series of a metric name (all label values).
func sumMetric(m e2etest.Metrics, name string) float64 { return m.Sum(name) }

// histQuantile estimates quantile q of the observations between two
// scrapes of a Prometheus histogram without labels as the upper bound of
// its bucket (+Inf as 1e18).
func histQuantile(before, after e2etest.Metrics, name string, q float64) (bound float64, count float64) {
	type bucket struct{ le, n float64 }
	prev := map[float64]float64{}
	for _, b := range unlabelledBuckets(before, name) {
		prev[b.GetUpperBound()] = float64(b.GetCumulativeCount())
	}
	var bs []bucket
	for _, b := range unlabelledBuckets(after, name) {
		le := b.GetUpperBound()
		n := float64(b.GetCumulativeCount()) - prev[le]
		if math.IsInf(le, +1) {
			le = 1e18
		}
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0, 0
	}
	total := bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= q*total {
			return b.le, total
		}
	}
	return bs[len(bs)-1].le, total
}

// unlabelledBuckets are the buckets of histogram name's series without
// labels.
func unlabelledBuckets(m e2etest.Metrics, name string) []*dto.Bucket {
	for _, s := range m[name].GetMetric() {
		if len(s.GetLabel()) == 0 {
			return s.GetHistogram().GetBucket()
		}
	}
	return nil
}
