package testenv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestRedisCluster checks the cluster serves every slot from three masters
// and that a cluster client reaches keys on all of them.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	start := time.Now()
	c := testenv.RedisCluster(t, 3)
	t.Logf("3-master cluster ready in %v: %v", time.Since(start).Round(time.Millisecond), c.Addrs())
	if len(c.Addrs()) != 3 || len(c.Nodes()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
	cc := c.Client(t)
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	covered, masters := 0, map[string]bool{}
	for _, s := range slots {
		covered += s.End - s.Start + 1
		masters[s.Nodes[0].Addr] = true
	}
	if covered != 16384 || len(masters) != 3 {
		t.Fatalf("slots cover %d with masters %v", covered, masters)
	}
	// Keys spread over the nodes: each node holds some of 30 keys.
	for k := 0; k < 30; k++ {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", k), k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes() {
		size, err := n.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if size == 0 || size == 30 {
			t.Errorf("node %s holds %d of 30 keys", n.Addr(), size)
		}
	}
}

// TestRedisClusterWithReplicas checks a 3+3 cluster: three masters with a
// replica each, and a master killed -9 is replaced by its replica, after
// which every slot is served again.
func TestRedisClusterWithReplicas(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	start := time.Now()
	c := testenv.RedisClusterWithReplicas(t, 3, 1)
	t.Logf("3+3 cluster ready in %v", time.Since(start).Round(time.Millisecond))
	masters, replicas := c.Masters(), c.Replicas()
	if len(c.Nodes()) != 6 || len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("%d nodes, %d masters, %d replicas", len(c.Nodes()), len(masters), len(replicas))
	}
	for i, n := range c.Nodes()[:3] {
		if masters[i] != n {
			t.Errorf("node %d (%s) is not a master; the first 3 should be", i, n.Addr())
		}
	}
	cc := c.Client(t)
	for k := 0; k < 30; k++ {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", k), k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	killed := time.Now()
	masters[0].Kill()
	for {
		if m := c.Masters(); len(m) == 3 {
			t.Logf("a replica took over %v after kill -9 of %s", time.Since(killed).Round(time.Millisecond), masters[0].Addr())
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no replica took over the killed master")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k := 0; k < 30; k++ {
		var err error
		for range 100 {
			if err = cc.Set(ctx, fmt.Sprintf("k%d", k), k, 0).Err(); err == nil {
				break
			}
			// A dead node answers no MOVED: only a reload of the slot
			// map sends the client to the promoted replica.
			cc.ReloadState(ctx)
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("write after failover: %v", err)
		}
	}
}
