package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/host"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/logging"
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
		f, err := os.Create(profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "flatline-bench child:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
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
	cmd      *exec.Cmd
	PID      int
	HTTPAddr string
	Started  time.Time
	done     chan struct{}
	waitErr  error
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
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if _, ok := settings["http.addr"]; !ok {
		settings["http.addr"] = httpAddr
	}
	cmd := exec.Command(self, childArg)
	cmd.Env = childEnv(settings)
	if profile != "" {
		cmd.Env = append(cmd.Env, childProfileEnv+"="+profile)
	}
	cmd.Stdout = os.Stderr
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &flatlineProc{cmd: cmd, HTTPAddr: settings["http.addr"], done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.PID = cmd.Process.Pid
	go prefixLines(stderr, "  flatline| ")
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the parent's environment without FLATLINE_* variables (a
// developer's own settings must not leak into the measured process), plus
// settings.
func childEnv(settings map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLATLINE_") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		name := "FLATLINE_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_"))
		env = append(env, name+"="+settings[k])
	}
	return env
}

func prefixLines(r io.Reader, prefix string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(os.Stderr, prefix+sc.Text())
	}
}

// Proc reads the child's CPU time and peak RSS.
func (p *flatlineProc) Proc() host.Proc { return host.ReadProc(p.PID) }

// Exited reports whether the child has exited, with its error.
func (p *flatlineProc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and waits for a graceful exit (killing it after
// timeout).
func (p *flatlineProc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.waitErr
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("flatline did not stop within %s; killed", timeout)
	}
}

// Metrics scrapes the child's /metrics into name{labels} -> value; for
// histograms the _bucket series are kept with their le label.
func (p *flatlineProc) Metrics(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.HTTPAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sumMetric adds every series of a metric name (all label values).
func sumMetric(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// histQuantile estimates quantile q of the observations between two
// scrapes of a Prometheus histogram as the upper bound of its bucket.
func histQuantile(before, after map[string]float64, name string, q float64) (bound float64, count float64) {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range after {
		rest, ok := strings.CutPrefix(k, name+`_bucket{le="`)
		if !ok {
			continue
		}
		leStr := strings.TrimSuffix(rest, `"}`)
		le, err := strconv.ParseFloat(leStr, 64)
		if leStr == "+Inf" {
			le, err = 1e18, nil
		}
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v - before[k]})
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

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
