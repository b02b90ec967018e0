package redismodes_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// The signals topic's partitions on a Redis Cluster and behind Sentinels.
const (
	clusterPartitions  = 8
	sentinelPartitions = 4
)

// suite is the cluster suite's load: 2,000 devices beating every 200 ms
// with a 1 s timeout, 100 of them going silent, on 8 partitions and 16
// shards.
var suite = e2etest.Scenario{Devices: 2000, Silent: 100, Partitions: clusterPartitions, Shards: 16}

// startOnCluster starts a 3-master Redis Cluster and runs the suite's
// scenario on it.
func startOnCluster(t *testing.T) *e2etest.Run {
	t.Helper()
	c := testenv.RedisCluster(t, 3)
	return suite.StartOnRedis(t, c.Addrs(), nil)
}

// redisStatus is the redis object of inst's /status. Right after a
// failover it may fail (a pooled connection to the dead primary): callers
// that wait for a state retry it.
func redisStatus(inst *e2etest.Instance) (redisconn.Status, error) {
	body, err := e2etest.HTTPGet("http://" + inst.HTTP.Addr() + "/status")
	if err != nil {
		return redisconn.Status{}, err
	}
	var st struct {
		Redis redisconn.Status `json:"redis"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return redisconn.Status{}, fmt.Errorf("decode /status: %w", err)
	}
	return st.Redis, nil
}
