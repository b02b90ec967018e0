package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
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
	signals    = "device-signals"
	timeouts   = "device-timeouts"
	dlq        = "device-signals-dlq"
	partitions = 8
)

// env is one test's Redis Cluster, Kafka and configuration.
type env struct {
	redis *testenv.ClusterServer
	kafka *testenv.KafkaCluster
	cfg   configs.Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{redis: testenv.RedisCluster(t, 3), kafka: testenv.Kafka(t, partitions, signals, timeouts, dlq)}
	cfg := configs.Default()
	cfg.Redis.Addrs = e.redis.Addrs()
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = e.kafka.Brokers()
	cfg.Kafka.GroupID = "flatline-" + cfg.Redis.KeyPrefix
	cfg.HTTP.Addr = ""
	cfg.ShutdownTimeout = 5 * time.Second
	e.cfg = cfg
	return e
}

// start runs an instance until stop (or the test's end).
func start(t *testing.T, cfg configs.Config) (a *app.App, stop func() error) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() && os.Getenv("FLATLINE_TEST_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log, app.Hooks{})
	if err != nil {
		cancel()
		t.Fatalf("start flatline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// received is one event read back from the timeouts topic.
type received struct {
	key string
	ev  dispatch.Event
	at  time.Time
}

// collect reads every partition of the timeouts topic into a channel.
func collect(t *testing.T, brokers []string) <-chan received {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan received, 100000)
	var wg sync.WaitGroup
	for p := 0; p < partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: timeouts, Partition: p, MaxWait: 50 * time.Millisecond})
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

// fleet beats for its devices into the signals topic every interval; a
// device with a silence time stops for good at that time.
type fleet struct {
	ids      []string
	silentAt []time.Time
	mu       sync.Mutex
	lastBeat map[string]int64 // ts of the last heartbeat of the devices that go silent
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

func startFleet(t *testing.T, brokers []string, ids []string, interval time.Duration, silentAt []time.Time) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{ids: ids, silentAt: silentAt, lastBeat: make(map[string]int64), cancel: cancel, done: make(chan struct{})}
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: signals, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireOne, BatchSize: 10000, BatchTimeout: time.Millisecond,
	}
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
			for k, id := range ids {
				if s := silentAt[k]; !s.IsZero() {
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
					f.err = err
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

// stop ends the heartbeats and reports a produce error that ended them early.
func (f *fleet) stop() {
	f.cancel()
	<-f.done
}

// events gathers the timeouts received so far, by device.
type events struct {
	ch  <-chan received
	got map[string][]received
}

// drain takes what arrived.
func (e *events) drain() {
	for {
		select {
		case r := <-e.ch:
			e.got[r.ev.DeviceID] = append(e.got[r.ev.DeviceID], r)
		default:
			return
		}
	}
}

// until takes events until cond holds or d passes, and reports whether cond held.
func (e *events) until(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for !cond() {
		select {
		case r := <-e.ch:
			e.got[r.ev.DeviceID] = append(e.got[r.ev.DeviceID], r)
		case <-deadline:
			return false
		}
	}
	return true
}

// fired counts the silent devices that got at least one timeout.
func (f *fleet) fired(e *events) int {
	n := 0
	for k, id := range f.ids {
		if !f.silentAt[k].IsZero() && len(e.got[id]) > 0 {
			n++
		}
	}
	return n
}

// verdict checks exactly one timeout per silent device, with its fields
// right, and none for live devices; it logs the lateness.
func (f *fleet) verdict(t *testing.T, e *events, timeout time.Duration, shards int) {
	t.Helper()
	if f.err != nil {
		t.Fatalf("heartbeats stopped early: %v", f.err)
	}
	var late []time.Duration
	for k, id := range f.ids {
		evs := e.got[id]
		if f.silentAt[k].IsZero() {
			if len(evs) > 0 {
				t.Errorf("live device %s got %d timeouts: %+v", id, len(evs), evs[0].ev)
			}
			continue
		}
		if len(evs) != 1 {
			var desc []string
			for _, r := range evs {
				desc = append(desc, fmt.Sprintf("{deadline %d shard %d detected %d}", r.ev.DeadlineMs, r.ev.Shard, r.ev.DetectedAtMs))
			}
			t.Errorf("silent device %s got %d timeouts, want exactly 1: %v", id, len(evs), desc)
			continue
		}
		r := evs[0]
		ev := r.ev
		if r.key != id || ev.DeviceID != id || ev.Type != "timeout" {
			t.Errorf("%s: key %q, event %+v", id, r.key, ev)
		}
		if ev.DeadlineMs-ev.LastSeenMs != ev.TimeoutMs || ev.TimeoutMs != timeout.Milliseconds() {
			t.Errorf("%s: deadline %d - last_seen %d != timeout %d", id, ev.DeadlineMs, ev.LastSeenMs, ev.TimeoutMs)
		}
		f.mu.Lock()
		last := f.lastBeat[id]
		f.mu.Unlock()
		if ev.LastSeenMs != last {
			t.Errorf("%s: last_seen_ms %d, but its last heartbeat had ts %d", id, ev.LastSeenMs, last)
		}
		if ev.EventID != dispatch.TimeoutEventID(id, ev.DeadlineMs) {
			t.Errorf("%s: event_id %q", id, ev.EventID)
		}
		if ev.DetectedAtMs < ev.DeadlineMs {
			t.Errorf("%s: detected at %d before its deadline %d", id, ev.DetectedAtMs, ev.DeadlineMs)
		}
		if ev.Shard < 0 || ev.Shard >= shards {
			t.Errorf("%s: shard %d of %d", id, ev.Shard, shards)
		}
		late = append(late, r.at.Sub(time.UnixMilli(ev.DeadlineMs)))
	}
	if len(late) > 0 {
		slices.Sort(late)
		t.Logf("%d timeouts; lateness deadline→received p50 %v p99 %v max %v",
			len(late), late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
	}
}
