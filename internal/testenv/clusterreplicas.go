package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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
