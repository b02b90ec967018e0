package sentinel_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/app"
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
	t.Parallel()
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("wait_replicas %d", replicas), func(t *testing.T) {
			t.Parallel()
			failoverWait(t, replicas)
		})
	}
}

func failoverWait(t *testing.T, replicas int) {
	const (
		devices = 2000
		silent  = 150
		shards  = 16
		pass    = "repl-secret"
	)
	s := testenv.RedisSentinel(t, testenv.SentinelOptions{DataArgs: []string{
		"--user", "repl", "on", ">" + pass, "~*", "&*", "+@all", "--masteruser", "repl", "--masterauth", pass,
	}})
	k := testenv.Kafka(t, partitions, e2etest.Topics...)
	cfg := e2etest.Config(t, s.Addrs(), k.Brokers())
	cfg.Redis.Mode = redisconn.ModeSentinel
	cfg.Redis.Sentinel.Master = s.Master()
	cfg.Shards.InitialCount = shards
	cfg.Timeouts.Default = timeout
	cfg.Redis.WaitReplicas = replicas
	cfg.Redis.WaitTimeout = 250 * time.Millisecond
	cfg.Scanner.LeaseTTL = 2 * time.Second
	inst := e2etest.Start(t, cfg, app.Hooks{})
	events := e2etest.Collect(t, k.Brokers(), e2etest.Timeouts, partitions)

	begin := time.Now()
	cut := begin.Add(4 * time.Second)
	kill := cut.Add(time.Second)
	silentAt := e2etest.SilentSchedule(rand.New(rand.NewPCG(14, uint64(replicas))), devices, silent, begin.Add(2*time.Second), kill.Add(5*time.Second))
	f := e2etest.StartFleet(t, k.Brokers(), e2etest.IDs("sfo-", devices), interval, silentAt)

	primary, replica := s.Primary(), s.Replica()
	time.Sleep(time.Until(cut))
	pc := primary.Client(t)
	ctx := testenv.Context(t, time.Minute)
	if err := pc.Do(ctx, "acl", "setuser", "repl", "off").Err(); err != nil {
		t.Fatal(err)
	}
	if err := pc.Do(ctx, "client", "kill", "user", "repl").Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitReplicaLink(t, replica, "down", 5*time.Second)
	time.Sleep(time.Until(kill))
	primary.Kill()
	killed := time.Now()
	if p := s.WaitFailover(primary, 30*time.Second); p != replica {
		t.Fatalf("the Sentinels promoted %s, not the replica %s", p.Addr(), replica.Addr())
	}
	promoted := time.Since(killed)
	inst.Log.Note("test: killed primary %s; %s promoted %v later", primary.Addr(), replica.Addr(), promoted.Round(time.Millisecond))
	// The old primary comes back, empty, and the Sentinels make it the new
	// one's replica.
	primary.Start()
	testenv.WaitRole(t, primary, "slave", 30*time.Second)
	rejoined := time.Since(killed)
	t.Logf("primary %s killed at +%v; the Sentinels promoted the lagging replica %s %v later; the old primary synced as its replica %v after the kill",
		primary.Addr(), killed.Sub(begin).Round(time.Millisecond), replica.Addr(), promoted.Round(time.Millisecond), rejoined.Round(time.Millisecond))

	e2etest.FinishFailover(t, f, events, e2etest.Want{Timeout: timeout, Shards: shards, Delivery: e2etest.AtLeastOnce}, inst, killed, replicas > 0)
}
