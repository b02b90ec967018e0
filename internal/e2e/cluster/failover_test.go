package cluster_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestFailoverWithReplicas is SPEC §7's promise for a Redis Cluster
// failover: 3 masters with a replica each, 2,000 devices beating every
// 200 ms with a 1 s timeout, 150 going silent at moments around the
// failover. One master's replica loses its replication link (the
// replication user disabled, its connection killed) 1 s before that master
// is killed with SIGKILL; the cluster (node timeout 1 s) promotes the
// replica, which lacks that last second of writes, and the old master comes
// back empty as its replica. With redis.wait_replicas 1 every silent
// device gets its timeout for its last heartbeat and no live device gets
// one; a timeout may repeat, with its event_id. The same run with 0 is
// logged, not asserted: what a failover costs without WAIT.
func TestFailoverWithReplicas(t *testing.T) {
	e2etest.EachWaitReplicas(t, failover)
}

func failover(t *testing.T, replicas int) {
	c := testenv.RedisClusterWithReplicas(t, 3, 1, append([]string{"--cluster-node-timeout", "1000"}, e2etest.ReplUserArgs("repl-secret")...)...)
	sc := e2etest.FailoverScenario
	sc.Partitions = partitions
	run := sc.StartOnRedis(t, c.Addrs(), func(cfg *configs.Config) { e2etest.ConfigureFailover(cfg, replicas) })
	e2etest.LaggingReplicaFailover(t, run, replicas, "fo-", e2etest.Topology{
		Primary: "master",
		Pair: func() (master, replica *testenv.RedisServer) {
			master, replica = c.MasterAndReplica(t, run.Inst.Store.Keys().Deadlines(0))
			if replica == nil {
				t.Fatalf("the master %s of shard 0 has no replica", master.Addr())
			}
			return master, replica
		},
		Promote: func(_, replica *testenv.RedisServer) { testenv.WaitRole(t, replica, "master", 30*time.Second) },
	})
}
