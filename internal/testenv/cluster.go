package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/freeport"
)

// How long `redis-cli --cluster create` and the nodes' agreement on the slot
// map may take: a few seconds normally, more on a loaded CI machine.
const (
	clusterCreateTimeout = 60 * time.Second
	clusterOKTimeout     = 30 * time.Second
	// The largest client port whose cluster bus port (+10000) exists.
	maxClusterPort = 65535 - 10000
)

// ClusterServer is a private Redis Cluster owned by one test, each node a
// redis-server process on its own free loopback port and temp dir, with
// all 16384 slots spread evenly over the masters.
type ClusterServer struct {
	nodes    []*RedisServer
	masters  int
	replicas int // per master
}

// RedisCluster starts masters redis-server processes in cluster mode
// (--cluster-enabled yes --cluster-node-timeout 2000, no persistence), joins
// them with `redis-cli --cluster create ... --cluster-replicas 0`, and
// returns once CLUSTER INFO reports cluster_state:ok, every slot served and
// every node known on each of them. The processes are killed in t.Cleanup.
//
// A node's cluster bus listens on its port + 10000, so nodes get ports at
// most 55535 (the upper part of Linux's ephemeral range has no bus port);
// --cluster-port would free that, but only from Redis 7 on.
//
// When redis-server or redis-cli (Debian: redis-tools) is not on PATH the
// test is skipped, or fails in CI (env CI=true).
func RedisCluster(t testing.TB, masters int) *ClusterServer {
	t.Helper()
	return RedisClusterWithReplicas(t, masters, 0)
}

// RedisClusterWithReplicas is RedisCluster with replicasPerMaster replicas
// of every master: masters*(1+replicasPerMaster) nodes, the first masters
// of them masters (as redis-cli assigns them). It returns once the cluster
// is ok and every master has all its replicas connected and in sync, so a
// master killed right away (Kill) fails over to one of them about
// cluster-node-timeout (2 s) later.
//
// extraArgs go to every node after the defaults, which they override (e.g.
// "--cluster-node-timeout", "1000" for a faster failover).
func RedisClusterWithReplicas(t testing.TB, masters, replicasPerMaster int, extraArgs ...string) *ClusterServer {
	t.Helper()
	if masters < 3 {
		t.Fatalf("testenv: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	if replicasPerMaster < 0 {
		t.Fatalf("testenv: negative replicas per master: %d", replicasPerMaster)
	}
	cli := lookTool(t, "redis-cli", "redis-tools")
	c := &ClusterServer{masters: masters, replicas: replicasPerMaster}
	for k := 0; k < masters*(1+replicasPerMaster); k++ {
		c.nodes = append(c.nodes, startClusterNode(t, extraArgs...))
	}
	c.create(t, cli)
	if err := c.waitOK(clusterOKTimeout); err != nil {
		t.Fatalf("testenv: Redis Cluster %v: %v", c.Addrs(), err)
	}
	if err := c.waitReplicas(clusterOKTimeout); err != nil {
		t.Fatalf("testenv: Redis Cluster %v: %v", c.Addrs(), err)
	}
	return c
}

// startClusterNode starts one empty cluster-mode node on a fresh port,
// retrying with another when some process took it or its bus port; extra
// follows the default arguments.
func startClusterNode(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	s := newServer(t, argValue(extra, "--requirepass"), append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000",
	}, extra...))
	err := s.startOnFreePort(freeClusterPort, func() {
		// A failed attempt may have written its node id and ports already.
		_ = os.Remove(filepath.Join(s.dir, "nodes.conf"))
	})
	if err != nil {
		t.Fatalf("testenv: start cluster node: %v", err)
	}
	return s
}

// freeClusterPort is a free port that has a cluster bus port.
func freeClusterPort() (int, error) {
	for range 100 {
		port, err := freeport.Loopback()
		if err != nil || port <= maxClusterPort {
			return port, err
		}
	}
	return 0, fmt.Errorf("no free port below %d (the cluster bus needs port+10000): see net.ipv4.ip_local_port_range", maxClusterPort+1)
}

// create assigns the slots and introduces the nodes to each other.
func (c *ClusterServer) create(t testing.TB, cli string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitOK polls CLUSTER INFO on every node until each reports the cluster ok
// with all slots served and every node known, so a client's first slot map
// is complete wherever it reads it.
func (c *ClusterServer) waitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	want := []string{
		"cluster_state:ok",
		"cluster_slots_ok:16384",
		"cluster_known_nodes:" + strconv.Itoa(len(c.nodes)),
		"cluster_size:" + strconv.Itoa(c.masters),
	}
	for _, n := range c.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, PoolSize: 1})
		err := poll(deadline, func(ctx context.Context) error {
			info, err := rc.ClusterInfo(ctx).Result()
			if err != nil {
				return fmt.Errorf("node %s not ok within %v: %v", n.Addr(), timeout, err)
			}
			if !hasAll(info, want) {
				return fmt.Errorf("node %s not ok within %v: %s", n.Addr(), timeout, strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " "))
			}
			return nil
		})
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// hasAll says whether every line of want is a line of info.
func hasAll(info string, want []string) bool {
	lines := strings.Split(info, "\r\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			return false
		}
	}
	return true
}

// waitReplicas waits until every master reports all its replicas online
// and every replica's link to its master is up.
func (c *ClusterServer) waitReplicas(timeout time.Duration) error {
	if c.replicas == 0 {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for _, n := range c.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: n.password, MaxRetries: -1, PoolSize: 1})
		err := poll(deadline, func(ctx context.Context) error {
			info, err := rc.Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("node %s: %v", n.Addr(), err)
			}
			switch {
			case strings.Contains(info, "role:master"):
				if want := "connected_slaves:" + strconv.Itoa(c.replicas) + "\r\n"; !strings.Contains(info, want) || strings.Count(info, "state=online") != c.replicas {
					return fmt.Errorf("master %s does not have its %d replicas online", n.Addr(), c.replicas)
				}
			case !strings.Contains(info, "master_link_status:up"):
				return fmt.Errorf("replica %s not in sync", n.Addr())
			}
			return nil
		})
		_ = rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Masters are the nodes that answer ROLE as master now (after a failover,
// a promoted replica is one); nodes that are down are left out.
func (c *ClusterServer) Masters() []*RedisServer { return c.withRole("master") }

// Replicas are the nodes that answer ROLE as replica now.
func (c *ClusterServer) Replicas() []*RedisServer { return c.withRole("slave") }

func (c *ClusterServer) withRole(role string) []*RedisServer {
	var out []*RedisServer
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: n.password, MaxRetries: -1, PoolSize: 1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := rc.Do(ctx, "ROLE").Slice()
		cancel()
		_ = rc.Close()
		if err == nil && len(r) > 0 && r[0] == role {
			out = append(out, n)
		}
	}
	return out
}

// Addrs are the nodes' host:port addresses, in start order.
func (c *ClusterServer) Addrs() []string { return addrs(c.nodes) }

// Nodes are the cluster's processes, for tests that stop and restart one:
// a node restarted with Start keeps its id and slots (its nodes.conf stays)
// but not its data (no persistence unless a test enables it).
func (c *ClusterServer) Nodes() []*RedisServer { return c.nodes }

// Client returns a cluster client of the nodes, closed in t.Cleanup.
func (c *ClusterServer) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
