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
