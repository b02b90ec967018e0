package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
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
