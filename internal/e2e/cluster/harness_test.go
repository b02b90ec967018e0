package cluster_test

import (
	"testing"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const partitions = 8

// suite is the cluster suite's load: 2,000 devices beating every 200 ms
// with a 1 s timeout, 100 of them going silent, on 8 partitions and 16
// shards.
var suite = e2etest.Scenario{Devices: 2000, Silent: 100, Partitions: partitions, Shards: 16}

// startOnCluster starts a 3-master Redis Cluster and runs the suite's
// scenario on it.
func startOnCluster(t *testing.T) *e2etest.Run {
	t.Helper()
	c := testenv.RedisCluster(t, 3)
	return suite.StartOnRedis(t, c.Addrs(), nil)
}
