package cluster_test

import (
	"testing"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const partitions = 8

// newEnv starts a 3-master Redis Cluster and an in-process Kafka, and
// returns the configuration of an instance on them and the brokers.
func newEnv(t *testing.T) (configs.Config, []string) {
	t.Helper()
	c := testenv.RedisCluster(t, 3)
	k := testenv.Kafka(t, partitions, e2etest.Topics...)
	return e2etest.Config(t, c.Addrs(), k.Brokers()), k.Brokers()
}
