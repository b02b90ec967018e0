package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	signals  = "device-signals"
	timeouts = "device-timeouts"
	dlq      = "device-signals-dlq"
)

// env is one test's Redis, Kafka and configuration.
type env struct {
	redis *testenv.RedisServer
	kafka *testenv.KafkaCluster
	cfg   configs.Config
}

func newEnv(t *testing.T, partitions int) *env {
	t.Helper()
	e := &env{redis: testenv.Redis(t), kafka: testenv.Kafka(t, partitions, signals, timeouts, dlq)}
	cfg := configs.Default()
	cfg.Redis.Addrs = []string{e.redis.Addr()}
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = e.kafka.Brokers()
	cfg.Kafka.GroupID = "flatline-" + cfg.Redis.KeyPrefix
	cfg.HTTP.Addr = ""
	cfg.ShutdownTimeout = 5 * time.Second
	e.cfg = cfg
	return e
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("FLATLINE_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// instance is a running app; stop cancels it and waits for Run to return.
type instance struct {
	*app.App
	stop func() error
}

func start(t *testing.T, cfg configs.Config, hooks app.Hooks) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, testLogger(t), hooks)
	if err != nil {
		cancel()
		t.Fatalf("start flatline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return &instance{App: a, stop: stop}
}

// received is one event read back from the timeouts topic.
type received struct {
	key string
	ev  dispatch.Event
	at  time.Time
}

// collect reads every partition of topic from the start into a channel.
func collect(t *testing.T, brokers []string, topic string, partitions int) <-chan received {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan received, 100000)
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 50 * time.Millisecond})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				var ev dispatch.Event
				if err := json.Unmarshal(m.Value, &ev); err != nil {
					t.Errorf("undecodable event %q: %v", m.Value, err)
					continue
				}
				out <- received{key: string(m.Key), ev: ev, at: time.Now()}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return out
}

func newWriter(brokers []string, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireOne, BatchSize: 10000, BatchTimeout: time.Millisecond,
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(p * float64(len(sorted)-1))
	return sorted[k]
}

// fleet beats for a set of devices into the signals topic every interval
// until stopped; a device stops for good at its silence time (zero: never).
type fleet struct {
	ids      []string
	silentAt []time.Time
	mu       sync.Mutex
	lastBeat map[string]int64 // of the devices that go silent
	cancel   context.CancelFunc
	done     chan struct{}
	errs     chan error
}

func startFleet(t *testing.T, brokers []string, ids []string, interval time.Duration, silentAt []time.Time) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{ids: ids, silentAt: silentAt, lastBeat: make(map[string]int64), cancel: cancel, done: make(chan struct{}), errs: make(chan error, 1)}
	w := newWriter(brokers, signals)
	go func() {
		defer close(f.done)
		defer w.Close()
		msgs := make([]kafka.Message, 0, len(ids))
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			now := time.Now()
			ms := now.UnixMilli()
			msgs = msgs[:0]
			f.mu.Lock()
			for i, id := range ids {
				if s := silentAt[i]; !s.IsZero() {
					if !now.Before(s) {
						continue
					}
					f.lastBeat[id] = ms
				}
				msgs = append(msgs, kafka.Message{Key: []byte(id), Value: []byte(`{"ts":` + strconv.FormatInt(ms, 10) + `}`), Time: now})
			}
			f.mu.Unlock()
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() == nil {
					f.errs <- err
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(f.stop)
	return f
}

func (f *fleet) stop() {
	f.cancel()
	<-f.done
}

// last returns the ts of a silent device's last heartbeat.
func (f *fleet) last(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBeat[id]
}

// verdict checks the events: exactly one timeout per silent device with its
// fields right, none for live devices; it returns the lateness samples.
func (f *fleet) verdict(t *testing.T, got gathered, timeout time.Duration, shards int) (late []time.Duration) {
	t.Helper()
	for i, id := range f.ids {
		evs := got[id]
		if f.silentAt[i].IsZero() {
			if len(evs) > 0 {
				t.Errorf("live device %s got %d timeouts: %+v", id, len(evs), evs[0].ev)
			}
			continue
		}
		if len(evs) != 1 {
			var desc []string
			for _, e := range evs {
				desc = append(desc, fmt.Sprintf("{deadline %d shard %d detected %d}", e.ev.DeadlineMs, e.ev.Shard, e.ev.DetectedAtMs))
			}
			t.Errorf("silent device %s got %d timeouts, want exactly 1: %v", id, len(evs), desc)
			continue
		}
		ev, key := evs[0].ev, evs[0].key
		if key != id || ev.DeviceID != id || ev.Type != "timeout" {
			t.Errorf("%s: key %q, event %+v", id, key, ev)
		}
		if ev.DeadlineMs-ev.LastSeenMs != ev.TimeoutMs || ev.TimeoutMs != timeout.Milliseconds() {
			t.Errorf("%s: deadline %d - last_seen %d != timeout %d", id, ev.DeadlineMs, ev.LastSeenMs, ev.TimeoutMs)
		}
		if ev.LastSeenMs != f.last(id) {
			t.Errorf("%s: last_seen_ms %d, but its last heartbeat had ts %d", id, ev.LastSeenMs, f.last(id))
		}
		if ev.EventID != id+"/"+strconv.FormatInt(ev.DeadlineMs, 10) {
			t.Errorf("%s: event_id %q", id, ev.EventID)
		}
		if ev.DetectedAtMs < ev.DeadlineMs {
			t.Errorf("%s: detected at %d before its deadline %d", id, ev.DetectedAtMs, ev.DeadlineMs)
		}
		if ev.Shard < 0 || ev.Shard >= shards {
			t.Errorf("%s: shard %d of %d", id, ev.Shard, shards)
		}
		late = append(late, evs[0].at.Sub(time.UnixMilli(ev.DeadlineMs)))
	}
	return late
}

// gathered holds received events by device.
type gathered map[string][]received

func (g gathered) add(r received) { g[r.ev.DeviceID] = append(g[r.ev.DeviceID], r) }

// until gathers from ch until done() holds, failing after d.
func (g gathered) until(t *testing.T, ch <-chan received, d time.Duration, what string, done func() bool) {
	t.Helper()
	limit := time.After(d)
	for !done() {
		select {
		case r := <-ch:
			g.add(r)
		case <-limit:
			t.Fatalf("after %s: %s", d, what)
		}
	}
}

// during gathers from ch for d.
func (g gathered) during(ch <-chan received, d time.Duration) {
	end := time.After(d)
	for {
		select {
		case r := <-ch:
			g.add(r)
		case <-end:
			return
		}
	}
}

// drain gathers what ch holds now.
func (g gathered) drain(ch <-chan received) {
	for len(ch) > 0 {
		g.add(<-ch)
	}
}
