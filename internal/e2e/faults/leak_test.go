package faults_test

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestProbesAndScrapesLeakNothing runs `flatline serve` with a small fleet
// and sends it what a platform sends for weeks, condensed: 1,000 calls each
// of /readyz, /healthz, /metrics and /status, each on a connection of its
// own, as kubelet probes come. 10 s after the last one, the process holds
// no more goroutines (20 of noise allowed), no more Kafka connections (5),
// no more Redis connections than its pools allow, and no more open files
// than before them.
func TestProbesAndScrapesLeakNothing(t *testing.T) {
	bin := flatlineBinary(t)
	e := e2etest.NewEnv(t, 4)
	env := serveEnv(e.Cfg, map[string]string{
		"FLATLINE_TIMEOUTS_DEFAULT":     "2s",
		"FLATLINE_SHARDS_INITIAL_COUNT": "16",
		"FLATLINE_HTTP_ADDR":            "127.0.0.1:0",
	})
	logs := e2etest.NewLogBuffer(500)
	logs.DumpOnFailure(t, "flatline serve")
	addr := httpAddrOf(logs)
	p := startProc(t, bin, env, logs, "serve")
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatal("flatline serve did not report its HTTP address")
	}
	fleet := e2etest.StartFleet(t, e.Kafka.Brokers(), e2etest.IDs("lk-", 200), 200*time.Millisecond, make([]time.Time, 200))
	defer fleet.Stop()
	e2etest.Eventually(t, 30*time.Second, "ready", func() bool { return e2etest.HTTPStatus(base+"/readyz") == http.StatusOK })

	kafkaPort := port(t, e.Kafka.Brokers()[0])
	redisPort := port(t, e.Redis.Addr())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func(path string) {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	type sample struct {
		goroutines float64
		res        testenv.ProcResources
	}
	measure := func() sample {
		m, err := e2etest.ScrapeMetrics(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		g, _ := m.Value("go_goroutines")
		r, err := testenv.ReadProcResources(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		return sample{goroutines: g, res: r}
	}
	// A round of every call first, so that what the first of each sets up
	// once (the Kafka client's pool, Redis connections) is in the baseline.
	for _, path := range []string{"/readyz", "/healthz", "/metrics", "/status"} {
		call(path)
	}
	time.Sleep(10 * time.Second) // the same settling the final sample gets
	before := measure()
	start := time.Now()
	for i := 0; i < 1000; i++ {
		for _, path := range []string{"/readyz", "/healthz", "/metrics", "/status"} {
			call(path)
		}
	}
	took := time.Since(start)
	time.Sleep(10 * time.Second) // 10 s, as docs/operations.md says: what outlives the calls by that is a leak
	after := measure()
	t.Logf("4,000 calls in %v; goroutines %v -> %v, open files %d -> %d, Kafka connections %d -> %d, Redis connections %d -> %d",
		took.Round(time.Millisecond), before.goroutines, after.goroutines, before.res.FDs, after.res.FDs,
		before.res.TCPTo[kafkaPort], after.res.TCPTo[kafkaPort], before.res.TCPTo[redisPort], after.res.TCPTo[redisPort])
	if d := after.goroutines - before.goroutines; d > 20 {
		t.Errorf("%v goroutines more after the calls (allowed: 20)", d)
	}
	if d := after.res.TCPTo[kafkaPort] - before.res.TCPTo[kafkaPort]; d > 5 {
		t.Errorf("%d Kafka connections more after the calls (allowed: 5)", d)
	}
	// go-redis's pools: the main one, 10 connections per CPU by default,
	// the pipelines' own (DefaultPipelinePoolSize, dialed only as
	// pipelines overlap), and one connection outside both, the scanners'
	// wakes subscription.
	if n, most := after.res.TCPTo[redisPort], 10*goMaxProcs(t)+redis.DefaultPipelinePoolSize+1; n > most {
		t.Errorf("%d Redis connections, past the pools' sizes and the subscription (%d)", n, most)
	}
	if d := after.res.FDs - before.res.FDs; d > 25 {
		t.Errorf("%d open files more after the calls", d)
	}
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// goMaxProcs is the child's GOMAXPROCS: this machine's CPUs.
func goMaxProcs(*testing.T) int { return runtime.NumCPU() }
