package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// How long `redis-cli --cluster create` and the nodes' agreement on the slot
// map may take: a few seconds normally, more on a loaded CI machine.
const (
	clusterCreateTimeout = 60 * time.Second
	clusterOKTimeout     = 30 * time.Second
	// The largest client port whose cluster bus port (+10000) exists.
	maxClusterPort = 65535 - 10000
)

// ClusterServer is a private Redis Cluster owned by one test: masters only,
// each a redis-server process on its own free loopback port and temp dir,
// with all 16384 slots spread evenly over them.
type ClusterServer struct {
	nodes []*RedisServer
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
	if masters < 3 {
		t.Fatalf("testenv: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	bin := lookTool(t, "redis-server", "redis-server")
	cli := lookTool(t, "redis-cli", "redis-tools")
	c := &ClusterServer{}
	for k := 0; k < masters; k++ {
		c.nodes = append(c.nodes, startClusterNode(t, bin))
	}
	c.create(t, cli)
	if err := c.waitOK(clusterOKTimeout); err != nil {
		t.Fatalf("testenv: Redis Cluster %v: %v", c.Addrs(), err)
	}
	return c
}

// lookTool finds name on PATH, skipping the test (failing it in CI) when it
// is missing; pkg is the Debian package that provides it.
func lookTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if InCI() {
			t.Fatalf("testenv: %s not found on PATH (Debian package %s; CI must not skip Redis Cluster tests): %v", name, pkg, err)
		}
		t.Skipf("testenv: %s not found on PATH (Debian package %s): %v", name, pkg, err)
	}
	return p
}

// startClusterNode starts one empty cluster-mode node on a fresh port,
// retrying with another when some process took it or its bus port.
func startClusterNode(t testing.TB, bin string) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir()}
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.kill)
	s.extra = []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000",
	}
	for attempt := 1; ; attempt++ {
		port, err := freeClusterPort()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		// A failed attempt may have written its node id and ports already.
		_ = os.Remove(filepath.Join(s.dir, "nodes.conf"))
		s.port = port
		err = s.start()
		if err == nil {
			return s
		}
		if !errors.Is(err, errAddrInUse) || attempt == redisPortAttempts {
			t.Fatalf("testenv: start cluster node: %v", err)
		}
	}
}

// freeClusterPort is a free port that has a cluster bus port.
func freeClusterPort() (int, error) {
	for range 100 {
		port, err := freePort()
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
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
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
		"cluster_size:" + strconv.Itoa(len(c.nodes)),
	}
	for _, n := range c.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, PoolSize: 1})
		err := func() error {
			defer rc.Close()
			var last string
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				info, err := rc.ClusterInfo(ctx).Result()
				cancel()
				if err == nil && hasAll(info, want) {
					return nil
				}
				if err != nil {
					last = err.Error()
				} else {
					last = strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " ")
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("node %s not ok within %v: %s", n.Addr(), timeout, last)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func hasAll(info string, want []string) bool {
	lines := strings.Split(info, "\r\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			if l == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Addrs are the nodes' host:port addresses, in start order.
func (c *ClusterServer) Addrs() []string {
	out := make([]string, len(c.nodes))
	for k, n := range c.nodes {
		out[k] = n.Addr()
	}
	return out
}

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
