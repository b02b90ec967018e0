package cluster_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
)

// TestOneAddressReachesTheWholeCluster is a managed cluster's configuration
// endpoint: redis.addrs names one node of a 3-master cluster and redis.mode
// is auto, so flatline asks that node, finds cluster mode enabled and uses a
// cluster client. Every shard works: the deadlines land on all three
// masters, each silent device gets exactly one timeout and no live one any,
// and /status reports the cluster.
func TestOneAddressReachesTheWholeCluster(t *testing.T) {
	t.Parallel()
	c := testenv.RedisCluster(t, 3)
	run := e2etest.Scenario{Devices: 600, Silent: 60, Partitions: partitions, Shards: 16}.StartOnRedis(t, c.Addrs()[1:2], func(cfg *configs.Config) {
		if cfg.Redis.Mode != redisconn.ModeAuto {
			t.Fatalf("redis.mode %q; the test is about auto", cfg.Redis.Mode)
		}
		cfg.HTTP.Addr = "127.0.0.1:0"
	})
	inst, cfg := run.Inst, run.Cfg

	quiet := time.Now().Add(2 * time.Second)
	run.StartFleet(t, "ep-", run.Every(quiet))

	// Before the silences: every master holds some shards' deadlines.
	ctx := testenv.Context(t, time.Minute)
	e2etest.EventuallyNil(t, 20*time.Second, "deadlines on every master", func() error {
		st, err := rebalance.ReadStatus(ctx, inst.Store, time.Now())
		if err != nil {
			return err
		}
		if st.Tracked < int64(run.Devices) {
			return nil
		}
		for _, n := range c.Nodes() {
			keys, err := n.Client(t).Keys(ctx, cfg.Redis.KeyPrefix+":{*}:deadlines").Result()
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return fmt.Errorf("master %s holds no shard's deadlines", n.Addr())
			}
		}
		return nil
	})

	body, err := e2etest.HTTPGet("http://" + inst.HTTP.Addr() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Redis redisconn.Status `json:"redis"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	want := redisconn.Status{Mode: redisconn.ModeCluster, MaxmemoryPolicy: "noeviction", Persistence: redisconn.PersistOff}
	if st.Redis != want {
		t.Errorf("/status redis %+v, want %+v", st.Redis, want)
	}
	if n := inst.Log.Count("Redis persistence is off"); n != 3 {
		t.Errorf("%d persistence warnings at start, want one per master (3)", n)
	}

	run.Finish(t, 45*time.Second, e2etest.ExactlyOnce)
}
