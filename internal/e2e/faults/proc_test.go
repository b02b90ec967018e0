package faults_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// binDir holds the flatline binary built once per test run (TestMain removes it).
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flatline-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildErr  error
)

// flatlineBinary builds ./cmd/flatline (without -race: the child is the
// system under test, not the test) once per test run and returns its path.
func flatlineBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "flatline")
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		start := time.Now()
		cmd := exec.Command(goTool, "build", "-o", bin, "github.com/flatline-dev/flatline/cmd/flatline")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/flatline: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// serveEnv is the environment of a `flatline serve` child on cfg's Redis
// and Kafka, with cfg's key prefix and consumer group, HTTP off and info
// logs; vars add to it or override it.
func serveEnv(cfg configs.Config, vars map[string]string) []string {
	all := map[string]string{
		"FLATLINE_REDIS_ADDRS":      strings.Join(cfg.Redis.Addrs, ","),
		"FLATLINE_REDIS_KEY_PREFIX": cfg.Redis.KeyPrefix,
		"FLATLINE_KAFKA_BROKERS":    strings.Join(cfg.Kafka.Brokers, ","),
		"FLATLINE_KAFKA_GROUP_ID":   cfg.Kafka.GroupID,
		"FLATLINE_HTTP_ADDR":        "",
		"FLATLINE_LOG_LEVEL":        "info",
	}
	maps.Copy(all, vars)
	return testenv.ChildEnv(all)
}

// serveRig is what a test of `flatline serve` children starts from: the
// binary, a Redis and a Kafka for the scenario, one log of all the
// children (dumped when the test fails) and, once started, the fleet and
// the collector of the timeouts.
type serveRig struct {
	e2etest.Scenario // filled
	*e2etest.Env
	bin    string
	logs   *e2etest.LogBuffer
	fleet  *e2etest.Fleet
	events *e2etest.Collector
}

// newServeRig builds the binary and starts the scenario's environment;
// the children's log keeps logLines lines and is dumped under name.
func newServeRig(t *testing.T, sc e2etest.Scenario, logLines int, name string) *serveRig {
	t.Helper()
	sc = sc.Filled()
	r := &serveRig{Scenario: sc, bin: flatlineBinary(t)}
	r.Env = e2etest.NewEnv(t, sc.Partitions)
	r.logs = e2etest.NewLogBuffer(logLines)
	r.logs.DumpOnFailure(t, name)
	return r
}

// env is the environment of a child (serveEnv) with the scenario's timeout
// and shard count; vars add to it.
func (r *serveRig) env(vars map[string]string) []string {
	all := map[string]string{
		"FLATLINE_TIMEOUTS_DEFAULT":     r.Timeout.String(),
		"FLATLINE_SHARDS_INITIAL_COUNT": strconv.Itoa(r.Shards),
	}
	maps.Copy(all, vars)
	return serveEnv(r.Cfg, all)
}

// startFleet starts the scenario's devices, named prefix00000 on, the
// silent ones going silent at random moments within [from, to), and the
// collector of the timeouts.
func (r *serveRig) startFleet(t *testing.T, rng *rand.Rand, prefix string, from, to time.Time) *e2etest.Fleet {
	t.Helper()
	brokers := r.Kafka.Brokers()
	r.fleet = e2etest.StartFleet(t, brokers, e2etest.IDs(prefix, r.Devices), r.Interval, r.Schedule(rng, from, to))
	r.events = e2etest.Collect(t, brokers, e2etest.Timeouts, r.Partitions)
	return r.fleet
}

// store reaches the rig's Redis as the children do.
func (r *serveRig) store(t *testing.T) *shard.Store {
	return shard.NewStore(r.Redis.Client(t), shard.NewKeys(r.Cfg.Redis.KeyPrefix))
}

// allFired reports whether every silent device got a timeout.
func (r *serveRig) allFired() bool { return r.fleet.Fired(r.events) == r.Silent }

// verdict reads the timeouts topic to its end, once the children and the
// fleet stopped, and returns the verdict: at least once, as a child killed
// or stopped may repeat a timeout; a device a hold of the storm guard
// re-entered may fire from the hold's end.
func (r *serveRig) verdict(t *testing.T) e2etest.Verdict {
	t.Helper()
	r.events.Drain(t)
	w := r.Want(e2etest.AtLeastOnce)
	w.Held = e2etest.HeldIn(t, r.store(t))
	return r.fleet.Verdict(t, r.events, w)
}

// startProc starts bin with args and env, its stdout and stderr going to
// logs. It is killed in t.Cleanup if still running.
func startProc(t *testing.T, bin string, env []string, logs *e2etest.LogBuffer, args ...string) *testenv.Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	p, err := testenv.StartProcess(cmd)
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(p.Kill)
	return p
}

var httpAddrRE = regexp.MustCompile(`msg="http listening".* addr=(\S+)`)

// httpAddrOf watches logs for the address a child's HTTP server bound.
func httpAddrOf(logs *e2etest.LogBuffer) <-chan string {
	ch := make(chan string, 16)
	logs.Watch(func(line string) {
		if m := httpAddrRE.FindStringSubmatch(line); m != nil {
			select {
			case ch <- m[1]:
			default:
			}
		}
	})
	return ch
}
