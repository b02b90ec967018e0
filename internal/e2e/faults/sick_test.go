package faults_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// The promises of one sick instance (docs/operations.md, "One instance cut
// off from Redis"), for a cut of sickCut.
const (
	sickCut = 30 * time.Second
	// Timeouts due during the cut fire at most this late.
	sickMaxLate = 15 * time.Second
	// From this long into the cut, every /readyz of the sick instance is a
	// 503 naming Redis, answered within sickReadyWithin.
	sickReadyFrom   = 3 * time.Second
	sickReadyWithin = time.Second
)

// TestOneSickInstance runs three in-process `serve` instances on one Redis
// and Kafka while a fleet of 2,000 devices beats and 400 of them fall
// silent before, during and after a cut: the first instance reaches Redis
// through a testenv.LinkProxy whose link is cut for sickCut (30 s), hung
// (connections open, bytes dropped) in one subtest and reset in the other;
// its network to Kafka stays. Defaults throughout
// (ingest.release_after 5s, scanner.lease_ttl 5s), but a 2 s session
// timeout.
//
// The sick instance leaves the consumer group (flatline_ingest_released 1)
// and the other two read its partitions from the committed offsets, so
// the timeouts due during the cut fire at most sickMaxLate late, none
// falsely and none lost (at least once: a timeout may repeat across the
// takeover, with its event_id); its /readyz answers 503 naming Redis
// within a second from 3 s into the cut, polled every 200 ms; the first
// failed write is logged at WARN within moments; once the link is back it
// rejoins and the shards spread over the three again.
func TestOneSickInstance(t *testing.T) {
	t.Parallel()
	for _, cut := range []struct {
		name string
		cut  func(*testenv.LinkProxy)
	}{
		{"hung", (*testenv.LinkProxy).Hang},
		{"reset", (*testenv.LinkProxy).Reset},
	} {
		t.Run(cut.name, func(t *testing.T) { sickInstance(t, cut.cut) })
	}
}

// readyzSample is one GET /readyz of the sick instance.
type readyzSample struct {
	at     time.Time
	took   time.Duration
	status int // 0: no answer
	body   string
}

func sickInstance(t *testing.T, cut func(*testenv.LinkProxy)) {
	rng := seed(t)
	sc := e2etest.Scenario{Devices: 2000, Silent: 400, Interval: 500 * time.Millisecond, Timeout: 3 * time.Second, Partitions: 6, Shards: 16}.Filled()
	e := e2etest.NewEnv(t, sc.Partitions)
	e.Cfg.Timeouts.Default = sc.Timeout
	e.Cfg.Shards.InitialCount = sc.Shards
	e.Cfg.Kafka.SessionTimeout = 2 * time.Second
	proxy := testenv.Proxy(t, e.Redis.Addr())
	var insts []*e2etest.Instance
	for k, id := range []string{"sick", "well-a", "well-b"} {
		cfg := e.Cfg
		cfg.InstanceID = id
		if k == 0 {
			cfg.Redis.Addrs = []string{proxy.Addr()}
			cfg.HTTP.Addr = "127.0.0.1:0"
		}
		insts = append(insts, e2etest.Start(t, cfg, app.Hooks{}))
	}
	sick, well := insts[0], insts[1:]
	balanced := func() bool {
		shards := 0
		for _, in := range insts {
			n := len(in.Leaser.Owned())
			if len(in.Ingest.Owned()) == 0 || n < sc.Shards/3 || n > (sc.Shards+2)/3 {
				return false
			}
			shards += n
		}
		return shards == sc.Shards
	}
	e2etest.Eventually(t, 30*time.Second, "every instance reading partitions and scanning its share of the shards", balanced)
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, sc.Partitions)

	// Silences whose deadlines fall from 1 s before the cut to 5 s after
	// it; the first falls silent once every device beat.
	start := time.Now()
	cutAt := start.Add(6 * time.Second)
	healAt := cutAt.Add(sickCut)
	silentFrom := cutAt.Add(-sc.Timeout - time.Second)
	f := e2etest.StartFleet(t, e.Kafka.Brokers(), e2etest.IDs("sick-", sc.Devices), sc.Interval,
		e2etest.SilentSchedule(rng, sc.Devices, sc.Silent, silentFrom, healAt.Add(5*time.Second-sc.Timeout)))
	e2etest.Eventually(t, time.Until(silentFrom), "the fleet's first round", func() bool { return f.Rounds() > 0 })

	var firstWarn time.Time
	var warnMu sync.Mutex
	sick.Log.Watch(func(line string) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "ingest paused") {
			warnMu.Lock()
			if firstWarn.IsZero() {
				firstWarn = time.Now()
			}
			warnMu.Unlock()
		}
	})
	var samples []readyzSample
	var samplesMu sync.Mutex
	readyz := "http://" + sick.HTTP.Addr() + "/readyz"
	client := &http.Client{Timeout: 3 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	stopPolling := pollEvery(t, 200*time.Millisecond, func(ctx context.Context) {
		s := getReadyz(ctx, client, readyz)
		samplesMu.Lock()
		samples = append(samples, s)
		samplesMu.Unlock()
	})

	time.Sleep(time.Until(cutAt))
	cut(proxy)
	cutAt = time.Now()
	t.Logf("link to Redis cut at +%v", cutAt.Sub(start).Round(time.Millisecond))
	released := e2etest.Eventually(t, 20*time.Second, "the sick instance out of the consumer group", func() bool {
		return testutil.ToFloat64(sick.Metrics.IngestReleased) == 1
	})
	takeover := e2etest.Eventually(t, 20*time.Second, "the well instances reading every partition", func() bool {
		owned := map[int]bool{}
		for _, in := range well {
			for p := range in.Ingest.Owned() {
				owned[p] = true
			}
		}
		return len(owned) == sc.Partitions && len(sick.Ingest.Owned()) == 0
	}) + released
	if time.Now().After(healAt) {
		t.Fatalf("the sick instance left the group only %v into the %v cut", released, sickCut)
	}

	time.Sleep(time.Until(healAt))
	if got := testutil.ToFloat64(sick.Metrics.IngestReleased); got != 1 {
		t.Errorf("flatline_ingest_released = %v at the end of the cut, want 1", got)
	}
	proxy.Heal()
	healAt = time.Now()
	rejoined := e2etest.Eventually(t, 30*time.Second, "the sick instance reading partitions again", func() bool {
		return len(sick.Ingest.Owned()) > 0 && testutil.ToFloat64(sick.Metrics.IngestReleased) == 0
	})
	rebalanced := e2etest.Eventually(t, 30*time.Second, "the shards spread over the three instances again", balanced)
	readyAgain := e2etest.Eventually(t, 10*time.Second, "/readyz 200 again", func() bool {
		samplesMu.Lock()
		defer samplesMu.Unlock()
		return len(samples) > 0 && samples[len(samples)-1].status == http.StatusOK
	})
	stopPolling()
	// The instances that reach Redis never took a rebalance for a fault.
	for _, in := range well {
		for _, line := range []string{"ingest paused", "leaving the consumer group"} {
			if n := in.Log.Count(line); n > 0 {
				t.Errorf("%s logged %q %d times, reaching Redis all along", in.ID(), line, n)
			}
		}
	}

	v := f.Finish(t, events, 60*time.Second, sc.Want(e2etest.AtLeastOnce), insts...)

	// Lateness of the timeouts due during the cut, and of the others.
	var during, outside []time.Duration
	for _, id := range f.SilentIDs() {
		for _, r := range events.ByDevice()[id] {
			if r.Ev.Type != dispatch.TypeTimeout {
				continue
			}
			d := time.UnixMilli(r.Ev.DeadlineMs)
			late := r.At.Sub(d)
			if !d.Before(cutAt) && d.Before(healAt) {
				during = append(during, late)
				if late > sickMaxLate {
					t.Errorf("%s: due %v into the cut, fired %v late, want at most %v", id, d.Sub(cutAt).Round(time.Millisecond), late.Round(time.Millisecond), sickMaxLate)
				}
			} else {
				outside = append(outside, late)
			}
			break
		}
	}
	if len(during) < sc.Silent/2 {
		t.Errorf("only %d timeouts were due during the cut: the test proves little", len(during))
	}

	// /readyz from sickReadyFrom into the cut to its end (a poll the
	// healing overtook is left out).
	var inCut []readyzSample
	var early []string
	for _, s := range samples {
		switch {
		case s.at.Before(cutAt) || !s.at.Add(s.took).Before(healAt):
		case s.at.Before(cutAt.Add(sickReadyFrom)):
			early = append(early, fmt.Sprintf("%d in %v", s.status, s.took.Round(time.Millisecond)))
		default:
			inCut = append(inCut, s)
		}
	}
	var tookMax time.Duration
	var body string
	for _, s := range inCut {
		body = s.body
		tookMax = max(tookMax, s.took)
		if s.status != http.StatusServiceUnavailable || !strings.Contains(s.body, "redis: ") || s.took > sickReadyWithin {
			t.Errorf("/readyz %v into the cut: %d %q after %v, want 503 naming redis within %v",
				s.at.Sub(cutAt).Round(time.Millisecond), s.status, s.body, s.took.Round(time.Millisecond), sickReadyWithin)
		}
	}
	if len(inCut) < int((sickCut-sickReadyFrom)/time.Second) {
		t.Errorf("only %d /readyz answers from %v into the cut: the poll stalled", len(inCut), sickReadyFrom)
	}

	warnMu.Lock()
	warnAfter := firstWarn.Sub(cutAt)
	warnMu.Unlock()
	if firstWarn.IsZero() || warnAfter < 0 || warnAfter > 2*time.Second {
		t.Errorf("first WARN \"ingest paused\" %v after the cut, want within 2s", warnAfter)
	}
	for _, line := range []string{"leaving the consumer group", "left the consumer group", "rejoining the consumer group", "ingest resumed: redis answers again"} {
		if sick.Log.Count(line) == 0 {
			t.Errorf("the sick instance never logged %q", line)
		}
	}
	if n := sick.Log.Count("redis writes still failing"); n > int(sickCut/(10*time.Second))+1 {
		t.Errorf("%d \"still failing\" lines in a %v cut: not rate-limited", n, sickCut)
	}

	t.Logf("cut %v: first WARN %v in; out of the group %v in, its partitions read by the others %v in; "+
		"lateness of the %d timeouts due during the cut %s (the %d others %s); "+
		"/readyz in the first %v: %v; from then on %d answers, all 503, the slowest %v, the last %q; "+
		"link back: rejoined %v later, shards spread again %v later, /readyz 200 %v later; %v",
		sickCut, warnAfter.Round(time.Millisecond), released.Round(time.Millisecond), takeover.Round(time.Millisecond),
		len(during), e2etest.Spread(during), len(outside), e2etest.Spread(outside),
		sickReadyFrom, early, len(inCut), tookMax.Round(time.Millisecond), body,
		rejoined.Round(time.Millisecond), (rejoined + rebalanced).Round(time.Millisecond), (rejoined + rebalanced + readyAgain).Round(time.Millisecond), v)
}

// getReadyz GETs url and says what came back, and how soon.
func getReadyz(ctx context.Context, client *http.Client, url string) readyzSample {
	s := readyzSample{at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s
	}
	resp, err := client.Do(req)
	if err != nil {
		s.took = time.Since(s.at)
		s.body = err.Error()
		return s
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	s.took, s.status, s.body = time.Since(s.at), resp.StatusCode, strings.TrimSpace(string(b))
	return s
}
