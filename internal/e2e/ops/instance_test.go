package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	signals  = "device-signals"
	timeouts = "device-timeouts"
	dlq      = "device-signals-dlq"
)

// instance is a running flatline with its HTTP address.
type instance struct {
	*app.App
	cfg  configs.Config
	base string // http://host:port
}

// startInstance runs one flatline instance against a private redis-server
// and an in-process Kafka, with its admin HTTP server on a free port.
func startInstance(t *testing.T, shards int) *instance {
	t.Helper()
	rds := testenv.Redis(t)
	kfk := testenv.Kafka(t, 4, signals, timeouts, dlq)
	cfg := configs.Default()
	cfg.Redis.Addrs = []string{rds.Addr()}
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = kfk.Brokers()
	cfg.Kafka.GroupID = "flatline-" + cfg.Redis.KeyPrefix
	cfg.Shards.InitialCount = shards
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.ShutdownTimeout = 5 * time.Second

	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Hooks{})
	if err != nil {
		cancel()
		t.Fatalf("start flatline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("flatline run: %v", err)
			}
		})
	})
	return &instance{App: a, cfg: cfg, base: "http://" + a.HTTP.Addr()}
}

// heartbeat is one message for the signals topic; a nil value is sent as
// the raw bytes in raw.
type heartbeat struct {
	key       string
	timeoutMs int
	raw       []byte
}

// send produces msgs to the signals topic and waits for the acks.
func (in *instance) send(t *testing.T, msgs []heartbeat) {
	t.Helper()
	w := &kafka.Writer{
		Addr: kafka.TCP(in.cfg.Kafka.Brokers...), Topic: signals, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireOne, BatchSize: 1000, BatchTimeout: time.Millisecond,
	}
	defer w.Close()
	out := make([]kafka.Message, len(msgs))
	now := time.Now().UnixMilli()
	for i, m := range msgs {
		v := m.raw
		if v == nil {
			body := map[string]any{"device_id": m.key, "ts": now}
			if m.timeoutMs > 0 {
				body["timeout_ms"] = m.timeoutMs
			}
			v, _ = json.Marshal(body)
		}
		out[i] = kafka.Message{Key: []byte(m.key), Value: v}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, out...); err != nil {
		t.Fatalf("produce heartbeats: %v", err)
	}
}

// status fetches /status.
func (in *instance) status(t *testing.T) statusDoc {
	t.Helper()
	var st statusDoc
	if err := json.Unmarshal(in.get(t, "/status"), &st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	return st
}

type statusDoc struct {
	Instance string `json:"instance"`
	Layout   struct {
		Count int `json:"count"`
	} `json:"layout"`
	Tracked int64 `json:"tracked"`
	Shards  []struct {
		Owner string `json:"owner"`
	} `json:"shards"`
}

func (in *instance) get(t *testing.T, path string) []byte {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(in.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", path, res.StatusCode, err, body)
	}
	return body
}

// waitFor polls cond (every 50ms, up to 20s) until it returns "", and fails
// the test with its last answer otherwise. It waits on observable state of
// the instance, never on a fixed delay.
func waitFor(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, last)
}

// fleet returns n heartbeats of devices named prefix0..prefix{n-1}.
func fleet(prefix string, n, timeoutMs int) []heartbeat {
	out := make([]heartbeat, n)
	for i := range out {
		out[i] = heartbeat{key: fmt.Sprintf("%s%d", prefix, i), timeoutMs: timeoutMs}
	}
	return out
}
