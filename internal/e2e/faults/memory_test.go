package faults_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/testenv/host"
)

// TestMemoryBounded streams 300,000 distinct device ids through one `serve`
// process and checks that its live Go heap does not grow with the number
// of devices: the largest heap left live by a GC while the devices
// 200,001–300,000 stream through is compared with the largest while the
// first 100,000 do. Redis grows with the devices; the process must not.
//
// The heap is the child's, read from its GODEBUG=gctrace=1 lines (the
// live heap each GC marked; GOGC=10 for more samples), not runtime.ReadMemStats of the test binary:
// that also holds the in-process Kafka, which keeps every message and so
// does grow. Peak RSS (VmHWM) is reported.
//
// TestMemoryBoundedSoak is the full-size check, 5,000,000 ids; it
// runs only with FLATLINE_SOAK=1 (it takes minutes and a few GB in the
// test process for kfake's copy of the messages).
//
// Both run twice: exact (the default) and with ingest.coalesce_window, whose
// memory of recent writes is the one per-device structure in the process
// (it must stay bounded by the window and its entry cap).
func TestMemoryBounded(t *testing.T) {
	t.Parallel()
	// A short window: its memory (two windows of writes) fills up within
	// the first phase, so both phases see it at its steady size.
	for _, window := range []string{"0s", "250ms"} {
		t.Run("coalesce_window="+window, func(t *testing.T) { memoryRun(t, 300_000, 100_000, window) })
	}
}

func TestMemoryBoundedSoak(t *testing.T) {
	if os.Getenv("FLATLINE_SOAK") == "" {
		t.Skip("set FLATLINE_SOAK=1 to stream 5,000,000 devices through one instance")
	}
	for _, window := range []string{"0s", "1s"} {
		t.Run("coalesce_window="+window, func(t *testing.T) { memoryRun(t, 5_000_000, 1_000_000, window) })
	}
}

// gcTraceRE matches a gctrace line's heap sizes: at GC start, at GC end,
// and live (marked), in MB.
var gcTraceRE = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// gcSample is one GC of the child: the live heap it left and how many
// heartbeats the child had consumed by then.
type gcSample struct {
	liveMB   int
	consumed int64
}

// memoryRun streams total distinct devices through one instance and
// compares the live heap while the first `phase` devices stream through
// with the live heap while the last `phase` do.
func memoryRun(t *testing.T, total, phase int, coalesceWindow string) {
	// A 1 h timeout: nothing fires, the devices only stream through.
	r := newServeRig(t, e2etest.Scenario{Timeout: time.Hour, Partitions: 4, Shards: 16}, 500, "flatline serve")
	bin, logs := r.bin, r.logs
	rs, k, prefix := r.Redis, r.Kafka, r.Cfg.Redis.KeyPrefix
	env := r.env(map[string]string{
		"FLATLINE_INGEST_COALESCE_WINDOW": coalesceWindow,
		"FLATLINE_HTTP_ADDR":              "127.0.0.1:0",
		"GODEBUG":                         "gctrace=1",
		// More, smaller GC cycles: more samples of the live heap.
		"GOGC": "10",
	})

	var consumed atomic.Int64 // the child's flatline_heartbeats_consumed_total, last scraped
	var mu sync.Mutex
	var gcs []gcSample
	logs.Watch(func(line string) {
		if m := gcTraceRE.FindStringSubmatch(line); m != nil {
			live, _ := strconv.Atoi(m[3])
			mu.Lock()
			gcs = append(gcs, gcSample{liveMB: live, consumed: consumed.Load()})
			mu.Unlock()
		}
	})
	addr := httpAddrOf(logs)
	p := startProc(t, bin, env, logs, "serve")
	var metricsURL string
	select {
	case a := <-addr:
		metricsURL = "http://" + a + "/metrics"
	case <-time.After(20 * time.Second):
		t.Fatal("flatline serve did not report its HTTP address")
	}

	// Scrape progress and RSS every 50 ms while the devices stream through.
	var rssAtPhase atomic.Int64
	defer pollEvery(t, 50*time.Millisecond, func(context.Context) {
		m, err := e2etest.ScrapeMetrics(metricsURL)
		if err != nil {
			return
		}
		if v, ok := m.Value("flatline_heartbeats_consumed_total"); ok {
			n := int64(v)
			consumed.Store(n)
			if n >= int64(phase) && rssAtPhase.Load() == 0 {
				rssAtPhase.Store(host.ReadProc(p.Pid()).RSS)
			}
		}
	})()

	start := time.Now()
	produceDevices(t, k.Brokers(), total)
	produced := time.Since(start)
	e2etest.Eventually(t, 5*time.Minute, fmt.Sprintf("%d heartbeats consumed", total), func() bool {
		if p.Exited() {
			t.Fatalf("flatline exited: %v", p.State())
		}
		return consumed.Load() >= int64(total)
	})
	streamed := time.Since(start)
	atEnd := host.ReadProc(p.Pid())
	var tracked int64
	for i := 0; i < r.Shards; i++ {
		n, _ := rs.Client(t).ZCard(context.Background(), fmt.Sprintf("%s:{%d}:deadlines", prefix, i)).Result()
		tracked += n
	}
	usedMemory := redisUsedMemory(t, rs)
	if code, _ := p.Stop(15 * time.Second); code != 0 {
		t.Errorf("flatline serve exited with %d on SIGTERM, want 0", code)
	}

	mu.Lock()
	defer mu.Unlock()
	// The first phase skips the first tenth, where the process starts.
	early, late := maxLive(gcs, int64(phase)/10, int64(phase)), maxLive(gcs, int64(total-phase), int64(total))
	t.Logf("%d devices streamed in %v (produced in %v); %d GCs; live heap max %d MB over devices %d–%d (%d GCs), %d MB over devices %d–%d (%d GCs); "+
		"RSS %d MB after %d devices, %d MB after %d; peak RSS (VmHWM) %d MB; Redis: %d devices tracked, %d MB used",
		total, streamed.Round(time.Millisecond), produced.Round(time.Millisecond), len(gcs),
		early.max, phase/10, phase, early.n, late.max, total-phase, total, late.n,
		rssAtPhase.Load()>>20, phase, atEnd.RSS>>20, total, atEnd.PeakRSS>>20, tracked, usedMemory>>20)
	if early.n < 2 || late.n < 2 {
		t.Fatalf("too few GCs to compare (%d early, %d late)", early.n, late.n)
	}
	// A per-device leak of even 20 bytes over the 200,000 devices between
	// the phases would add 4 MB; gctrace rounds to whole MB.
	if limit := early.max + early.max/4 + 2; late.max > limit {
		t.Errorf("live heap grew with the devices: %d MB while the last %d streamed, %d MB while the first %d did (limit %d MB)",
			late.max, phase, early.max, phase, limit)
	}
}

type liveMax struct{ max, n int }

// maxLive is the largest live heap among the GCs that ran while the
// consumed count was within (from, to].
func maxLive(gcs []gcSample, from, to int64) liveMax {
	var out liveMax
	for _, g := range gcs {
		if g.consumed > from && g.consumed <= to {
			out.n++
			out.max = max(out.max, g.liveMB)
		}
	}
	return out
}

// produceDevices writes one heartbeat for each of n distinct devices.
func produceDevices(t *testing.T, brokers []string, n int) {
	t.Helper()
	const chunk = 10_000
	w := e2etest.NewWriter(brokers, e2etest.Signals)
	defer w.Close()
	msgs := make([]kafka.Message, chunk)
	for base := 0; base < n; base += chunk {
		now := time.Now()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		msgs = msgs[:min(chunk, n-base)]
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("mem-%08d", base+i)), Value: []byte(`{"ts":` + ts + `}`), Time: now}
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatalf("produce devices %d…: %v", base, err)
		}
	}
}

func redisUsedMemory(t *testing.T, rs *testenv.RedisServer) int64 {
	info, err := rs.Client(t).Info(context.Background(), "memory").Result()
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(redisconn.ParseInfo(info)["used_memory"], 10, 64)
	return n
}
