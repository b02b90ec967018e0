package sentinel_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestFailoverWithLaggingReplica is SPEC §7's promise for a Sentinel
// failover: a primary with one replica watched by three Sentinels
// (down-after 1 s), 2,000 devices beating every 200 ms with a 1 s timeout,
// 150 going silent at moments around the failover. The replica loses its
// replication link (the replication user disabled, its connection killed)
// 1 s before the primary is killed with SIGKILL; the Sentinels promote the
// replica, which lacks that last second of writes, and the old primary
// comes back empty and is made the new one's replica by the Sentinels.
// With redis.wait_replicas 1 every silent device gets its timeout for its
// last heartbeat and no live device gets one; a timeout may repeat, with
// its event_id. The same run with 0 is logged, not asserted: what a
// failover costs without WAIT.
func TestFailoverWithLaggingReplica(t *testing.T) {
	e2etest.EachWaitReplicas(t, failoverWait)
}

func failoverWait(t *testing.T, replicas int) {
	s := testenv.RedisSentinel(t, testenv.SentinelOptions{DataArgs: e2etest.ReplUserArgs("repl-secret")})
	sc := e2etest.FailoverScenario
	sc.Partitions = partitions
	run := sc.StartOnRedis(t, s.Addrs(), func(cfg *configs.Config) {
		cfg.Redis.Mode = redisconn.ModeSentinel
		cfg.Redis.Sentinel.Master = s.Master()
		e2etest.ConfigureFailover(cfg, replicas)
	})
	e2etest.LaggingReplicaFailover(t, run, replicas, "sfo-", e2etest.Topology{
		Primary: "primary",
		Pair:    func() (primary, replica *testenv.RedisServer) { return s.Primary(), s.Replica() },
		Promote: func(primary, replica *testenv.RedisServer) {
			if p := s.WaitFailover(primary, 30*time.Second); p != replica {
				t.Fatalf("the Sentinels promoted %s, not the replica %s", p.Addr(), replica.Addr())
			}
			// The old primary comes back empty next: not while a Sentinel
			// might still fail over again and promote it (seen in CI under
			// load: a Sentinel judged the new master down a second after
			// the switch, and the restarted, empty node was promoted).
			s.WaitSettled(replica, 2*time.Second, 30*time.Second)
		},
	})
}
