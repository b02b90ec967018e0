package pipeline_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	signals  = e2etest.Signals
	timeouts = e2etest.Timeouts
	dlq      = e2etest.DLQ
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

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
