// Package e2etest is the harness of the end-to-end suites (internal/e2e/pipeline,
// internal/e2e/cluster): running instances, a fleet that beats into the
// signals topic, a reader of the timeouts topic, and the verdict that
// exactly the silent devices got exactly one timeout, with every field
// right. Tests only.
package e2etest

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
)

// Topic names the suites use.
const (
	Signals  = "device-signals"
	Timeouts = "device-timeouts"
	DLQ      = "device-signals-dlq"
)

// Logger discards logs unless -v and FLATLINE_TEST_LOGS are set.
func Logger() *slog.Logger {
	if testing.Verbose() && os.Getenv("FLATLINE_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Instance is a running app; Stop cancels it and waits for Run to return.
type Instance struct {
	*app.App
	Stop func() error
}

// Start runs an instance until Stop or the end of the test.
func Start(t testing.TB, cfg configs.Config, hooks app.Hooks) *Instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, Logger(), hooks)
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
	return &Instance{App: a, Stop: stop}
}

// Received is one event read back from the timeouts topic.
type Received struct {
	Key string
	Ev  dispatch.Event
	At  time.Time
}

// Collect reads every partition of topic from the start into a channel.
func Collect(t testing.TB, brokers []string, topic string, partitions int) <-chan Received {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Received, 100000)
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
				out <- Received{Key: string(m.Key), Ev: ev, At: time.Now()}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return out
}

// NewWriter is a producer keyed like any Kafka client (murmur2).
func NewWriter(brokers []string, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireOne, BatchSize: 10000, BatchTimeout: time.Millisecond,
	}
}

// Percentile of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// Gathered holds received events by device.
type Gathered map[string][]Received

// Add records one event.
func (g Gathered) Add(r Received) { g[r.Ev.DeviceID] = append(g[r.Ev.DeviceID], r) }

// Until gathers from ch until done() holds, failing the test after d.
func (g Gathered) Until(t testing.TB, ch <-chan Received, d time.Duration, what string, done func() bool) {
	t.Helper()
	limit := time.After(d)
	for !done() {
		select {
		case r := <-ch:
			g.Add(r)
		case <-limit:
			t.Fatalf("after %s: %s", d, what)
		}
	}
}

// During gathers from ch for d.
func (g Gathered) During(ch <-chan Received, d time.Duration) {
	end := time.After(d)
	for {
		select {
		case r := <-ch:
			g.Add(r)
		case <-end:
			return
		}
	}
}

// Drain gathers what ch holds now.
func (g Gathered) Drain(ch <-chan Received) {
	for len(ch) > 0 {
		g.Add(<-ch)
	}
}

// Fleet beats for a set of devices into the signals topic every interval
// until stopped; a device stops for good at its silence time (zero: never).
type Fleet struct {
	IDs      []string
	SilentAt []time.Time
	mu       sync.Mutex
	lastBeat map[string]int64 // of the devices that go silent
	maxGap   time.Duration    // longest time between two rounds
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

// StartFleet starts beating.
func StartFleet(t testing.TB, brokers []string, ids []string, interval time.Duration, silentAt []time.Time) *Fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{IDs: ids, SilentAt: silentAt, lastBeat: make(map[string]int64), cancel: cancel, done: make(chan struct{})}
	w := NewWriter(brokers, Signals)
	go func() {
		defer close(f.done)
		defer w.Close()
		msgs := make([]kafka.Message, 0, len(ids))
		tick := time.NewTicker(interval)
		defer tick.Stop()
		prev := time.Now()
		for {
			now := time.Now()
			ms := now.UnixMilli()
			msgs = msgs[:0]
			f.mu.Lock()
			if gap := now.Sub(prev); gap > f.maxGap {
				f.maxGap = gap
			}
			prev = now
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
					f.mu.Lock()
					f.err = err
					f.mu.Unlock()
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
	t.Cleanup(f.Stop)
	return f
}

// Stop ends the heartbeats.
func (f *Fleet) Stop() {
	f.cancel()
	<-f.done
}

// Last returns the ts of a silent device's last heartbeat.
func (f *Fleet) Last(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBeat[id]
}

// Fired counts the silent devices that got at least one timeout.
func (f *Fleet) Fired(got Gathered) int {
	n := 0
	for i, id := range f.IDs {
		if !f.SilentAt[i].IsZero() && len(got[id]) > 0 {
			n++
		}
	}
	return n
}

// Silent counts the devices that go silent.
func (f *Fleet) Silent() int {
	n := 0
	for _, s := range f.SilentAt {
		if !s.IsZero() {
			n++
		}
	}
	return n
}

// Verdict checks the events: exactly one timeout per silent device with its
// fields right, none for live devices; it returns the lateness samples
// (deadline → read back). A fleet that could not keep its own rhythm (a
// starved machine) fails the test as such rather than blaming flatline.
func (f *Fleet) Verdict(t testing.TB, got Gathered, timeout time.Duration, shards int) (late []time.Duration) {
	t.Helper()
	f.mu.Lock()
	gap, err := f.maxGap, f.err
	f.mu.Unlock()
	if err != nil {
		t.Fatalf("heartbeats stopped early: %v", err)
	}
	if gap >= timeout {
		t.Fatalf("the fleet itself stalled: %v between two rounds of heartbeats (timeout %v)", gap, timeout)
	}
	for i, id := range f.IDs {
		evs := got[id]
		if f.SilentAt[i].IsZero() {
			if len(evs) > 0 {
				t.Errorf("live device %s got %d timeouts: %+v", id, len(evs), evs[0].Ev)
			}
			continue
		}
		if len(evs) != 1 {
			var desc []string
			for _, e := range evs {
				desc = append(desc, fmt.Sprintf("{deadline %d shard %d detected %d}", e.Ev.DeadlineMs, e.Ev.Shard, e.Ev.DetectedAtMs))
			}
			t.Errorf("silent device %s got %d timeouts, want exactly 1: %v", id, len(evs), desc)
			continue
		}
		ev, key := evs[0].Ev, evs[0].Key
		if key != id || ev.DeviceID != id || ev.Type != "timeout" {
			t.Errorf("%s: key %q, event %+v", id, key, ev)
		}
		if ev.DeadlineMs-ev.LastSeenMs != ev.TimeoutMs || ev.TimeoutMs != timeout.Milliseconds() {
			t.Errorf("%s: deadline %d - last_seen %d != timeout %d", id, ev.DeadlineMs, ev.LastSeenMs, ev.TimeoutMs)
		}
		if ev.LastSeenMs != f.Last(id) {
			t.Errorf("%s: last_seen_ms %d, but its last heartbeat had ts %d", id, ev.LastSeenMs, f.Last(id))
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
		late = append(late, evs[0].At.Sub(time.UnixMilli(ev.DeadlineMs)))
	}
	return late
}
