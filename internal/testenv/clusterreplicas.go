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

// RedisClusterWithReplicas starts a Redis Cluster of masters masters with
// one replica each (2×masters redis-server processes in cluster mode, no
// persistence, --cluster-node-timeout nodeTimeout, then extraArgs on every
// node), joined by `redis-cli --cluster create ... --cluster-replicas 1`.
// It returns once every node reports the cluster ok with all slots served
// and every node known, and every replica's link to its master is up. The
// processes are killed in t.Cleanup; Nodes lists them all, masters and
// replicas in no promised order (Roles tells them apart).
//
// A short node timeout makes a replica take over within about twice its
// value of its master's death.
func RedisClusterWithReplicas(t testing.TB, masters int, nodeTimeout time.Duration, extraArgs ...string) *ClusterServer {
	t.Helper()
	if masters < 3 {
		t.Fatalf("testenv: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	bin := lookTool(t, "redis-server", "redis-server")
	cli := lookTool(t, "redis-cli", "redis-tools")
	c := &ClusterServer{}
	args := append([]string{"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}, extraArgs...)
	for k := 0; k < 2*masters; k++ {
		c.nodes = append(c.nodes, startClusterNodeWith(t, bin, args))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: redis-cli %s: %v\n%s", strings.Join(create, " "), err, out)
	}
	want := []string{
		"cluster_state:ok",
		"cluster_slots_ok:16384",
		"cluster_known_nodes:" + strconv.Itoa(2*masters),
		"cluster_size:" + strconv.Itoa(masters),
	}
	deadline := time.Now().Add(clusterOKTimeout)
	for _, n := range c.nodes {
		if err := pollInfo(n, deadline, func(rc *redis.Client, ctx context.Context) (bool, string, error) {
			info, err := rc.ClusterInfo(ctx).Result()
			if err != nil {
				return false, "", err
			}
			if !hasAll(info, want) {
				return false, info, nil
			}
			repl, err := rc.Info(ctx, "replication").Result()
			if err != nil {
				return false, "", err
			}
			// A replica is ready once its first sync is done.
			ok := strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up")
			return ok, repl, nil
		}); err != nil {
			t.Fatalf("testenv: Redis Cluster %v: %v", c.Addrs(), err)
		}
	}
	return c
}

// startClusterNodeWith is startClusterNode with the node's extra arguments.
func startClusterNodeWith(t testing.TB, bin string, extra []string) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir(), password: argValue(extra, "--requirepass")}
	t.Cleanup(s.kill)
	s.extra = append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
	}, extra...)
	for attempt := 1; ; attempt++ {
		port, err := freeClusterPort()
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
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

// pollInfo asks cond of a client of n every 20 ms until it holds or the
// deadline passes; the error then carries cond's last description.
func pollInfo(n *RedisServer, deadline time.Time, cond func(*redis.Client, context.Context) (bool, string, error)) error {
	rc := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: n.password, MaxRetries: -1, PoolSize: 1})
	defer rc.Close()
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, desc, err := cond(rc, ctx)
		cancel()
		if ok {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = strings.ReplaceAll(strings.TrimSpace(desc), "\r\n", " ")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not ready: %s", n.Addr(), last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MasterAndReplica returns the node that serves key's slot as master now
// and the replica attached to it (nil when it has none), as the master's
// CLUSTER NODES and INFO replication say.
func (c *ClusterServer) MasterAndReplica(t testing.TB, key string) (master, replica *RedisServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	mc, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("testenv: master of %q: %v", key, err)
	}
	master = c.byAddr(mc.Options().Addr)
	info, err := mc.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("testenv: INFO replication of %s: %v", mc.Options().Addr, err)
	}
	for _, l := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(l, "slave0:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimPrefix(l, "slave0:"), ",") {
			if p, ok := strings.CutPrefix(f, "port="); ok {
				replica = c.byAddr("127.0.0.1:" + p)
			}
		}
	}
	if master == nil {
		t.Fatalf("testenv: master %s of %q is not a node of this cluster", mc.Options().Addr, key)
	}
	return master, replica
}

func (c *ClusterServer) byAddr(addr string) *RedisServer {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// WaitRole polls INFO replication of n until it reports role (master or
// slave), and for a replica its link up, failing the test after timeout.
func WaitRole(t testing.TB, n *RedisServer, role string, timeout time.Duration) {
	t.Helper()
	err := pollInfo(n, time.Now().Add(timeout), func(rc *redis.Client, ctx context.Context) (bool, string, error) {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return false, "", err
		}
		ok := strings.Contains(info, "role:"+role+"\r\n") && (role == "master" || strings.Contains(info, "master_link_status:up"))
		return ok, info, nil
	})
	if err != nil {
		t.Fatalf("testenv: role %s: %v", role, err)
	}
}
