package e2etest

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// Env is one test's Redis, Kafka and a configuration pointing at them.
type Env struct {
	Redis *testenv.RedisServer
	Kafka *testenv.KafkaCluster
	Cfg   configs.Config
}

// NewEnv starts a private redis-server (with redisArgs) and an in-process
// Kafka whose three topics have the given number of partitions.
func NewEnv(t testing.TB, partitions int, redisArgs ...string) *Env {
	t.Helper()
	e := &Env{Redis: testenv.Redis(t, redisArgs...), Kafka: testenv.Kafka(t, partitions, Topics...)}
	e.Cfg = Config(t, []string{e.Redis.Addr()}, e.Kafka.Brokers())
	return e
}

// Config is the configuration of a test's instances on redisAddrs (one
// server, or the nodes of a cluster) and brokers: a key prefix and consumer
// group of the test's own, HTTP off, and a shutdown short enough for a
// test.
func Config(t testing.TB, redisAddrs, brokers []string) configs.Config {
	t.Helper()
	cfg := configs.Default()
	cfg.Redis.Addrs = redisAddrs
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = brokers
	cfg.Kafka.GroupID = "flatline-" + cfg.Redis.KeyPrefix
	cfg.HTTP.Addr = ""
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}
