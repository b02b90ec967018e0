package cluster_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const partitions = 8

// env is one test's Redis Cluster, Kafka and configuration.
type env struct {
	redis *testenv.ClusterServer
	kafka *testenv.KafkaCluster
	cfg   configs.Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{redis: testenv.RedisCluster(t, 3), kafka: testenv.Kafka(t, partitions, e2etest.Signals, e2etest.Timeouts, e2etest.DLQ)}
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
