package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
