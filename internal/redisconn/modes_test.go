package redisconn_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestValidateNamesTheKey: every refusal of the mode settings names the key
// to fix.
func TestValidateNamesTheKey(t *testing.T) {
	t.Parallel()
	sentinel := func(c *redisconn.Config) {
		c.Mode = redisconn.ModeSentinel
		c.Addrs = []string{"s1:26379", "s2:26379", "s3:26379"}
		c.Sentinel.Master = "mymaster"
	}
	for _, tc := range []struct {
		name string
		edit func(*redisconn.Config)
		want string // "" = valid
	}{
		{"default", func(*redisconn.Config) {}, ""},
		{"unknown mode", func(c *redisconn.Config) { c.Mode = "replicated" }, `redis.mode: must be one of auto, standalone, cluster, sentinel, got "replicated"`},
		{"empty mode", func(c *redisconn.Config) { c.Mode = "" }, "redis.mode:"},
		{"standalone with two addresses", func(c *redisconn.Config) {
			c.Mode = redisconn.ModeStandalone
			c.Addrs = []string{"a:1", "b:2"}
		}, "redis.addrs: redis.mode standalone takes one address, got 2"},
		{"cluster with a db", func(c *redisconn.Config) { c.Mode = redisconn.ModeCluster; c.DB = 2 }, "redis.db: a Redis Cluster has only db 0, got 2"},
		{"auto with several addresses and a db", func(c *redisconn.Config) { c.Addrs = []string{"a:1", "b:2"}; c.DB = 1 }, "redis.db:"},
		{"auto with one address and a db", func(c *redisconn.Config) { c.DB = 1 }, ""},
		{"sentinel", sentinel, ""},
		{"sentinel with a db and credentials", func(c *redisconn.Config) {
			sentinel(c)
			c.DB = 3
			c.Sentinel.Username, c.Sentinel.Password = "s", "p"
		}, ""},
		{"sentinel without master", func(c *redisconn.Config) { sentinel(c); c.Sentinel.Master = "" }, "redis.sentinel.master: required with redis.mode sentinel"},
		{"sentinel master without sentinel mode", func(c *redisconn.Config) { c.Sentinel.Master = "mymaster" }, "redis.sentinel: set, but redis.mode is auto"},
		{"sentinel password in cluster mode", func(c *redisconn.Config) { c.Mode = redisconn.ModeCluster; c.Sentinel.Password = "x" }, "redis.sentinel: set, but redis.mode is cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redisconn.DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestAutoMode: with one address, auto asks the server and builds a cluster
// client for a cluster node (as for a managed cluster's configuration
// endpoint), a plain client for a standalone server, and refuses a
// Sentinel's address or a db on a cluster naming what to set.
func TestAutoMode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	standalone := testenv.Redis(t)
	cluster := testenv.RedisCluster(t, 3)

	rdb, err := redisconn.New(ctx, testenv.RedisConfig(t, standalone.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok || redisconn.ModeOf(rdb, testenv.RedisConfig(t, standalone.Addr())) != redisconn.ModeStandalone {
		t.Errorf("standalone server: built %T", rdb)
	}

	one := testenv.RedisConfig(t, cluster.Addrs()[1])
	crdb, err := redisconn.New(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	defer crdb.Close()
	if redisconn.ModeOf(crdb, one) != redisconn.ModeCluster {
		t.Fatalf("one cluster node: built %T, want a cluster client", crdb)
	}
	// Keys of every slot range work through the one address: a plain
	// client would meet MOVED for two thirds of them.
	for k := range 30 {
		if err := crdb.Set(ctx, fmt.Sprintf("k%d", k), k, 0).Err(); err != nil {
			t.Fatalf("set through the configuration endpoint: %v", err)
		}
	}
	for _, n := range cluster.Nodes() {
		if size, err := n.Client(t).DBSize(ctx).Result(); err != nil || size == 0 {
			t.Errorf("node %s holds %d keys (%v)", n.Addr(), size, err)
		}
	}

	withDB := one
	withDB.DB = 1
	_, err = redisconn.New(ctx, withDB)
	testenv.OneLineError(t, err, "", "redis.db", cluster.Addrs()[1], "cluster mode enabled")

	s := testenv.RedisSentinel(t, testenv.SentinelOptions{})
	_, err = redisconn.New(ctx, testenv.RedisConfig(t, s.Addrs()[0]))
	testenv.OneLineError(t, err, "", s.Addrs()[0], "is a Sentinel", "redis.mode: sentinel", "redis.sentinel.master")
}

// TestAutoModeWithoutINFO: a user whose ACL denies INFO (as some managed
// services do) still gets the right client: CLUSTER INFO tells.
func TestAutoModeWithoutINFO(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	const user, pw = "no-info", "pw-no-info"
	rs := testenv.Redis(t, "--user", user, "on", ">"+pw, "~*", "+@all", "-info")
	c := testenv.RedisConfig(t, rs.Addr())
	c.Username, c.Password = user, pw
	rdb, err := redisconn.New(ctx, c)
	if err != nil {
		t.Fatalf("auto mode without INFO: %v", err)
	}
	defer rdb.Close()
	if err := rdb.Info(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("INFO is allowed (%v): the test proves nothing", err)
	}
	if redisconn.ModeOf(rdb, c) != redisconn.ModeStandalone {
		t.Errorf("built %T, want a standalone client", rdb)
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestInspect reads each fact from CONFIG GET where allowed and from INFO
// where CONFIG is denied (as on managed services).
func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	const user, pw = "no-config", "pw-no-config"
	noConfig := []string{"--user", user, "on", ">" + pw, "~*", "+@all", "-config"}
	for _, tc := range []struct {
		name      string
		args      []string
		user      bool
		policy    string
		persisted string
		listpack  int
	}{
		{"defaults of testenv", nil, false, "noeviction", redisconn.PersistOff, 128},
		{"aof", []string{"--appendonly", "yes"}, false, "noeviction", redisconn.PersistAOF, 128},
		{"rdb", []string{"--save", "60 1"}, false, "noeviction", redisconn.PersistRDB, 128},
		{"aof and rdb", []string{"--appendonly", "yes", "--save", "60 1"}, false, "noeviction", redisconn.PersistAOFRDB, 128},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, false, "allkeys-lru", redisconn.PersistOff, 128},
		{"small listpacks", []string{"--zset-max-listpack-entries", "16"}, false, "noeviction", redisconn.PersistOff, 16},
		{"CONFIG denied", append([]string{"--maxmemory-policy", "volatile-lfu"}, noConfig...), true, "volatile-lfu", redisconn.PersistUnknown, -1},
		{"CONFIG denied, aof", append([]string{"--appendonly", "yes"}, noConfig...), true, "noeviction", redisconn.PersistAOF, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := testenv.Redis(t, tc.args...)
			c := testenv.RedisConfig(t, rs.Addr())
			if tc.user {
				c.Username, c.Password = user, pw
			}
			rdb, err := redisconn.New(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			if tc.user {
				if err := rdb.ConfigGet(ctx, "save").Err(); err == nil {
					t.Fatal("CONFIG allowed: the case proves nothing")
				}
			}
			masters, err := redisconn.Inspect(ctx, rdb, c)
			if err != nil {
				t.Fatal(err)
			}
			want := redisconn.Master{Addr: rs.Addr(), MaxmemoryPolicy: tc.policy, Persistence: tc.persisted, ZsetListpackEntries: tc.listpack}
			if len(masters) != 1 || masters[0] != want {
				t.Errorf("Inspect = %+v, want [%+v]", masters, want)
			}
		})
	}
}

// TestInspectCluster reads every master of a cluster with replicas; the
// status folds them: distinct policies joined, the fewest replicas.
func TestInspectCluster(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	cl := testenv.RedisClusterWithReplicas(t, 3, 1)
	masters := cl.Masters()
	if err := masters[2].Client(t).ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	c := testenv.RedisConfig(t, cl.Addrs()[0])
	rdb, err := redisconn.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	got, err := redisconn.Inspect(ctx, rdb, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Inspect read %d masters: %+v", len(got), got)
	}
	for _, m := range got {
		if m.Replicas != 1 {
			t.Errorf("master %+v; want 1 replica", m)
		}
	}
	st := redisconn.ReadStatus(ctx, rdb, c)
	want := redisconn.Status{Mode: redisconn.ModeCluster, MaxmemoryPolicy: "noeviction,volatile-lru", Persistence: redisconn.PersistOff, Replicas: 1}
	if st != want {
		t.Errorf("status %+v, want %+v", st, want)
	}
}

// TestClusterClientFollowsAFailover: after a master of a cluster is killed
// and its replica promoted, the client flatline builds sends that slot
// range's writes to the new master by itself. A dead master answers no
// MOVED, so this rests on the client re-reading the slot map (go-redis's
// default would wait up to 60 s).
func TestClusterClientFollowsAFailover(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 90*time.Second)
	cl := testenv.RedisClusterWithReplicas(t, 3, 1)
	c := testenv.RedisConfig(t, cl.Addrs()[0])
	rdb, err := redisconn.New(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	// Keys on every master; the client has its slot map.
	keys := make([]string, 30)
	for k := range keys {
		keys[k] = fmt.Sprintf("k%d", k)
		if err := rdb.Set(ctx, keys[k], k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	victim := cl.Masters()[0]
	victim.Kill()
	killed := time.Now()
	for len(cl.Masters()) < 3 {
		if ctx.Err() != nil {
			t.Fatal("no replica took over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	promoted := time.Now()
	deadline := promoted.Add(15 * time.Second)
	for _, k := range keys {
		for {
			err := rdb.Set(ctx, k, "after", 0).Err()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("write of %s still fails 15 s after the promotion: %v", k, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("master %s killed; replica promoted %v later; every write through again %v after that",
		victim.Addr(), promoted.Sub(killed).Round(time.Millisecond), time.Since(promoted).Round(time.Millisecond))
}
