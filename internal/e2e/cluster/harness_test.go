package cluster_test

import (
	"testing"

	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const partitions = 8

// startOnCluster starts a 3-master Redis Cluster and an in-process Kafka,
// runs an instance on them with 16 shards and the suite's timeout, and
// collects its timeouts. It returns the brokers for the fleet.
func startOnCluster(t *testing.T) (*e2etest.Instance, *e2etest.Collector, []string) {
	t.Helper()
	c := testenv.RedisCluster(t, 3)
	k := testenv.Kafka(t, partitions, e2etest.Topics...)
	cfg := e2etest.Config(t, c.Addrs(), k.Brokers())
	cfg.Shards.InitialCount = 16
	cfg.Timeouts.Default = timeout
	inst := e2etest.Start(t, cfg, app.Hooks{})
	return inst, e2etest.Collect(t, k.Brokers(), e2etest.Timeouts, partitions), k.Brokers()
}
