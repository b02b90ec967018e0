package redismodes_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
)

// clusterPartitions is the signals topic's partition count on a cluster.
const clusterPartitions = 8

// suite is the cluster suite's load: 2,000 devices beating every 200 ms
// with a 1 s timeout, 100 of them going silent, on 8 partitions and 16
// shards.
var suite = e2etest.Scenario{Devices: 2000, Silent: 100, Partitions: clusterPartitions, Shards: 16}

// startOnCluster starts a 3-master Redis Cluster and runs the suite's
// scenario on it.
func startOnCluster(t *testing.T) *e2etest.Run {
	t.Helper()
	c := testenv.RedisCluster(t, 3)
	return suite.StartOnRedis(t, c.Addrs(), nil)
}

// TestOneAddressReachesTheWholeCluster is a managed cluster's configuration
// endpoint: redis.addrs names one node of a 3-master cluster and redis.mode
// is auto, so flatline asks that node, finds cluster mode enabled and uses a
// cluster client. Every shard works: the deadlines land on all three
// masters, each silent device gets exactly one timeout and no live one any,
// and /status reports the cluster.
func TestOneAddressReachesTheWholeCluster(t *testing.T) {
	t.Parallel()
	c := testenv.RedisCluster(t, 3)
	run := e2etest.Scenario{Devices: 600, Silent: 60, Partitions: clusterPartitions, Shards: 16}.StartOnRedis(t, c.Addrs()[1:2], func(cfg *configs.Config) {
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
		st, err := inspect.ReadStatus(ctx, inst.Store, time.Now())
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

	st, err := redisStatus(inst)
	if err != nil {
		t.Fatal(err)
	}
	want := redisconn.Status{Mode: redisconn.ModeCluster, MaxmemoryPolicy: "noeviction", Persistence: redisconn.PersistOff}
	if st != want {
		t.Errorf("/status redis %+v, want %+v", st, want)
	}
	if n := inst.Log.Count("Redis persistence is off"); n != 3 {
		t.Errorf("%d persistence warnings at start, want one per master (3)", n)
	}

	run.Finish(t, 45*time.Second, e2etest.ExactlyOnce)
}

// TestEndToEndOnCluster is the core promise (docs/design.md) on a Redis Cluster: 16 shards
// over 3 masters, 2,000 devices beating every 200 ms with a 1 s timeout,
// 100 of them going silent: exactly those get exactly one timeout each, and
// no live device gets one.
func TestEndToEndOnCluster(t *testing.T) {
	t.Parallel()
	run := startOnCluster(t)

	quiet := time.Now().Add(2 * time.Second) // once the fleet is tracked
	run.StartFleet(t, "dev-", run.Every(quiet))

	late := run.Finish(t, 45*time.Second, e2etest.ExactlyOnce).Late
	t.Logf("%d timeouts; lateness deadline→received %s", len(late), e2etest.Spread(late))
}

// TestDoublingOnCluster doubles 16→32 shards on a Redis Cluster while the
// fleet beats and devices go silent at random moments before, during and
// after the migration: the layout finalizes by itself, and every silent
// device gets exactly one timeout, no live one any.
func TestDoublingOnCluster(t *testing.T) {
	t.Parallel()
	run := startOnCluster(t)
	inst, events := run.Inst, run.Events

	begin := time.Now().Add(2 * time.Second)
	f := run.StartFleet(t, "dbl-", run.Schedule(rand.New(rand.NewPCG(8, 9)), begin, begin.Add(5*time.Second)))

	// Scale once silences have begun and the first have fired.
	e2etest.Eventually(t, 30*time.Second, "the first silent device to time out", func() bool { return f.Fired(events) > 0 })
	l := e2etest.Rescale(t, inst, 16, 32, 30*time.Second)
	// Every member sits in its shard under 32, on whichever master.
	misplaced, total, err := inspect.CountMisplaced(context.Background(), inst.Store, l)
	if err != nil || misplaced != 0 || total == 0 {
		t.Errorf("after finalizing: %d of %d members misplaced (err %v)", misplaced, total, err)
	}
	f.Finish(t, events, 45*time.Second, e2etest.Want{Timeout: run.Timeout, Shards: 32}, inst)
}

// TestStoreOnCluster runs every shard.Store operation, and so every Lua
// script, against a 3-master cluster through the client flatline builds from
// its configuration, and checks where the keys end up: one slot per shard,
// the shards of a 16- and a 32-shard layout on all three masters.
func TestStoreOnCluster(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 45*time.Second)
	c := testenv.RedisCluster(t, 3)
	cfg := configs.Default()
	cfg.Redis.Addrs = c.Addrs()
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	rdb, store, err := app.Connect(ctx, cfg.Redis) // loads the scripts
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("redis.addrs with 3 addresses built a %T, want *redis.ClusterClient", rdb)
	}
	keys := store.Keys()
	const n = 16

	t.Run("shards spread over the masters", func(t *testing.T) {
		for _, count := range []int{16, 32} {
			byNode := map[string][]int{}
			for i := 0; i < count; i++ {
				shardKeys := []string{keys.Deadlines(i), keys.Down(i), keys.Overrides(i), keys.Lease(i)}
				var slots []int64
				for _, k := range shardKeys {
					slot, err := cc.ClusterKeySlot(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					slots = append(slots, slot)
				}
				if slices.Min(slots) != slices.Max(slots) {
					t.Errorf("shard %d's keys %v are in slots %v, want one slot", i, shardKeys, slots)
				}
				node, err := cc.MasterForKey(ctx, shardKeys[0])
				if err != nil {
					t.Fatal(err)
				}
				byNode[node.Options().Addr] = append(byNode[node.Options().Addr], i)
			}
			if len(byNode) != 3 {
				t.Errorf("%d shards sit on %d masters, want 3: %v", count, len(byNode), byNode)
			}
			t.Logf("%d shards by master: %v", count, byNode)
		}
	})

	t.Run("scripts loaded on every master", func(t *testing.T) {
		shas := scriptSHAs(t)
		// Start from empty script caches, so LoadScripts does the work.
		flushScripts(t, ctx, cc)
		if err := store.LoadScripts(ctx); err != nil {
			t.Fatal(err)
		}
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			exists, err := m.ScriptExists(ctx, shas...).Result()
			if err != nil {
				return err
			}
			for k, ok := range exists {
				if !ok {
					t.Errorf("master %s lacks script %s", m.Options().Addr, shas[k])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	now := time.Now().UnixMilli()
	later := shard.Score(now+3_600_000, 0)
	past := shard.Score(now-1000, 0)
	ids := make([]string, 200)
	home := make([]int, len(ids))
	for k := range ids {
		ids[k] = fmt.Sprintf("dev-%03d", k)
		home[k] = shard.Of(shard.Hash(ids[k]), n)
	}

	t.Run("write after the script caches were flushed", func(t *testing.T) {
		// A failover or restart empties a master's script cache: the
		// pipelined EVALSHA of Write then meets NOSCRIPT on every master,
		// and the store reloads the scripts and writes again.
		flushScripts(t, ctx, cc)
		var b shard.Batch
		b.Reset(n)
		for k, id := range ids {
			override := int64(0)
			if k%10 == 0 {
				override = 5000
			}
			b.Add(home[k], id, later, override)
		}
		if _, err := store.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		sizes, err := store.Sizes(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for i, s := range sizes {
			if s == 0 {
				t.Errorf("shard %d is empty", i)
			}
			total += s
		}
		if total != int64(len(ids)) {
			t.Fatalf("shards hold %d members, want %d", total, len(ids))
		}
		for k, id := range ids {
			if s, ok, err := store.Score(ctx, home[k], id); err != nil || !ok || s != later {
				t.Fatalf("%s in shard %d: score %v tracked %v err %v", id, home[k], s, ok, err)
			}
		}
		o, err := store.Overrides(ctx, home[10], []string{ids[10], ids[11]})
		if err != nil || o[ids[10]] != 5000 || o[ids[11]] != 0 {
			t.Fatalf("overrides %v err %v", o, err)
		}
		// ZADD GT: an earlier deadline never replaces a later one.
		b.Reset(n)
		b.Add(home[0], ids[0], past, 0)
		if _, err := store.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if s, _, _ := store.Score(ctx, home[0], ids[0]); s != later {
			t.Fatalf("an earlier heartbeat moved %s to %v", ids[0], s)
		}
	})

	t.Run("due, fired, recovered, removed, forgotten", func(t *testing.T) {
		// One due device in every shard.
		due := make([]string, n)
		var b shard.Batch
		b.Reset(n)
		for k := 0; ; k++ {
			id := fmt.Sprintf("due-%d", k)
			if i := shard.Of(shard.Hash(id), n); due[i] == "" {
				due[i] = id
				b.Add(i, id, past, 7000)
			}
			if !slices.Contains(due, "") {
				break
			}
		}
		if _, err := store.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			got, err := store.Due(ctx, i, shard.MaxScore(now), 0, 20)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != due[i] || got[0].Score != past {
				t.Fatalf("shard %d due %v, want %s", i, got, due[i])
			}
			if m, ok, err := store.Next(ctx, i); err != nil || !ok || m.ID != due[i] {
				t.Fatalf("shard %d next %v %v %v", i, m, ok, err)
			}
			// A removal with a score that is no longer current keeps the member.
			removed, raced, err := store.Fired(ctx, i, []shard.Member{{ID: due[i], Score: past - 1}}, 0)
			if err != nil || removed != 0 || len(raced) != 1 || raced[0].Score != past {
				t.Fatalf("shard %d: stale fired removed %d, raced %v, err %v", i, removed, raced, err)
			}
			removed, _, err = store.Fired(ctx, i, got, 0)
			if err != nil || removed != 1 {
				t.Fatalf("shard %d: fired removed %d, err %v", i, removed, err)
			}
			if _, ok, _ := store.Score(ctx, i, due[i]); ok {
				t.Fatalf("shard %d still tracks fired %s", i, due[i])
			}
			if ds, ok, err := store.DownScore(ctx, i, due[i]); err != nil || !ok || ds != past {
				t.Fatalf("shard %d: %s down score %v %v %v", i, due[i], ds, ok, err)
			}
			if o, _ := store.Overrides(ctx, i, []string{due[i]}); o[due[i]] != 0 {
				t.Fatalf("shard %d kept the override of fired %s", i, due[i])
			}
		}
		// A replay older than the fired timeout is dropped; a newer heartbeat
		// recovers the device, in every shard in one pipelined write.
		b.Reset(n)
		for i, id := range due {
			b.Add(i, id, shard.Score(now-2000, 0), 0)
		}
		if back, err := store.Write(ctx, &b); err != nil || len(back) != 0 {
			t.Fatalf("replays: recovered %v err %v", back, err)
		}
		b.Reset(n)
		for i, id := range due {
			b.Add(i, id, later, 0)
		}
		back, err := store.Write(ctx, &b)
		if err != nil || len(back) != n {
			t.Fatalf("recovered %d devices (err %v), want %d", len(back), err, n)
		}
		for _, r := range back {
			if due[r.Shard] != r.ID || r.DownScore != past {
				t.Errorf("recovered %+v", r)
			}
		}
		// RemoveIf hands back overrides, only for unchanged scores.
		i := home[10]
		got, err := store.RemoveIf(ctx, i, []shard.Member{{ID: ids[10], Score: later}, {ID: due[i], Score: past}})
		if err != nil || len(got) != 1 || got[ids[10]] != 5000 {
			t.Fatalf("remove if: %v err %v", got, err)
		}
		// Forget (a tombstone) untracks.
		b.Reset(n)
		b.Forget(home[20], ids[20])
		if _, err := store.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := store.Score(ctx, home[20], ids[20]); ok {
			t.Fatalf("forgotten %s still tracked", ids[20])
		}
	})

	t.Run("recoveries reported when one master lost its script cache", func(t *testing.T) {
		// One device down in every shard; then only one master restarts
		// (or fails over) and forgets the scripts. The write that recovers
		// them all meets NOSCRIPT there only: what the other masters
		// applied and reported must not be lost to a re-run.
		down := make([]string, n)
		var b shard.Batch
		b.Reset(n)
		for k := 0; slices.Contains(down, ""); k++ {
			id := fmt.Sprintf("down-%d", k)
			if i := shard.Of(shard.Hash(id), n); down[i] == "" {
				down[i] = id
				b.Add(i, id, past, 0)
			}
		}
		if _, err := store.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
		for i, id := range down {
			if removed, _, err := store.Fired(ctx, i, []shard.Member{{ID: id, Score: past}}, 0); err != nil || removed != 1 {
				t.Fatalf("fired %s: %d %v", id, removed, err)
			}
		}
		m, err := cc.MasterForKey(ctx, keys.Deadlines(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		b.Reset(n)
		for i, id := range down {
			b.Add(i, id, later, 0)
		}
		back, err := store.Write(ctx, &b)
		if err != nil {
			t.Fatal(err)
		}
		if len(back) != n {
			var got []int
			for _, r := range back {
				got = append(got, r.Shard)
			}
			slices.Sort(got)
			t.Errorf("a write recovering a device in each of %d shards reported %d recoveries (shards %v), want %d", n, len(back), got, n)
		}
	})

	t.Run("copies and moves across masters", func(t *testing.T) {
		// Under 32 shards a device of shard i may move to i+16, usually on
		// another master: Copies reads both in one pipeline, MoveIn writes
		// the new home.
		var shards []int
		var cids []string
		var moved []shard.Member
		for k, id := range ids[30:60] {
			to := shard.Of(shard.Hash(id), 2*n)
			shards = append(shards, home[30+k], to)
			cids = append(cids, id, id)
			if to != home[30+k] {
				moved = append(moved, shard.Member{ID: id, Score: later + 16})
			}
		}
		for _, m := range moved {
			if err := store.MoveIn(ctx, shard.Of(shard.Hash(m.ID), 2*n), []shard.Member{m}, map[string]int64{m.ID: 9000}); err != nil {
				t.Fatal(err)
			}
		}
		copies, err := store.Copies(ctx, shards, cids)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < len(cids); k += 2 {
			old, nu := copies[k], copies[k+1]
			if !old.HasLive || old.Live != later || old.HasDown {
				t.Errorf("%s in shard %d: %+v", cids[k], shards[k], old)
			}
			if shards[k] == shards[k+1] {
				continue
			}
			if !nu.HasLive || nu.Live != later+16 {
				t.Errorf("%s in shard %d: %+v", cids[k], shards[k+1], nu)
			}
			if o, _ := store.Overrides(ctx, shards[k+1], []string{cids[k]}); o[cids[k]] != 9000 {
				t.Errorf("%s moved without its override: %v", cids[k], o)
			}
		}
		if len(moved) == 0 {
			t.Fatal("no device of 30 moves on doubling")
		}
		// ScanShard walks a shard.
		var all []shard.Member
		var cursor uint64
		for {
			ms, next, err := store.ScanShard(ctx, 0, cursor, 10)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, ms...)
			if cursor = next; cursor == 0 {
				break
			}
		}
		sizes, _ := store.Sizes(ctx, 1)
		if int64(len(all)) != sizes[0] {
			t.Errorf("scan of shard 0 saw %d members, ZCARD %d", len(all), sizes[0])
		}
	})

	t.Run("watermarks, classes, leases, instances", func(t *testing.T) {
		if err := store.RaiseWatermarks(ctx, 4, map[int]int64{0: 100, 1: 200, 2: 300, 3: 400}); err != nil {
			t.Fatal(err)
		}
		if err := store.RaiseWatermarks(ctx, 0, map[int]int64{0: 50, 1: 250}); err != nil {
			t.Fatal(err)
		}
		wm, parts, err := store.Watermarks(ctx)
		if err != nil || parts != 4 || wm[0] != 100 || wm[1] != 250 || wm[3] != 400 {
			t.Fatalf("watermarks %v partitions %d err %v", wm, parts, err)
		}

		a, err := store.RegisterClasses(ctx, []string{"sensor", "gateway"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := store.RegisterClasses(ctx, []string{"gateway", "meter"})
		if err != nil || b[0] != a[1] || b[1] == a[0] || b[1] == a[1] {
			t.Fatalf("class ids %v then %v (err %v)", a, b, err)
		}
		names, err := store.ClassNames(ctx)
		if err != nil || names[a[0]] != "sensor" || names[b[1]] != "meter" {
			t.Fatalf("class names %v err %v", names, err)
		}

		for i := 0; i < n; i++ {
			if ok, err := store.AcquireLease(ctx, i, "A", 5*time.Second); err != nil || !ok {
				t.Fatalf("acquire %d: %v %v", i, ok, err)
			}
			if ok, _ := store.AcquireLease(ctx, i, "B", 5*time.Second); ok {
				t.Fatalf("B took held lease %d", i)
			}
			if ok, err := store.RenewLease(ctx, i, "B", 5*time.Second); err != nil || ok {
				t.Fatalf("B renewed lease %d: %v %v", i, ok, err)
			}
			if ok, err := store.RenewLease(ctx, i, "A", 5*time.Second); err != nil || !ok {
				t.Fatalf("A could not renew lease %d: %v %v", i, ok, err)
			}
			if err := store.ReleaseLease(ctx, i, "B"); err != nil {
				t.Fatal(err)
			}
		}
		owners, err := store.LeaseOwners(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range owners {
			if o != "A" {
				t.Errorf("shard %d owner %q, want A", i, o)
			}
		}
		for i := 0; i < n; i += 2 {
			if err := store.ReleaseLease(ctx, i, "A"); err != nil {
				t.Fatal(err)
			}
		}
		owners, _ = store.LeaseOwners(ctx, n)
		for i, o := range owners {
			if want := map[bool]string{true: "", false: "A"}[i%2 == 0]; o != want {
				t.Errorf("after release: shard %d owner %q, want %q", i, o, want)
			}
		}

		nowMs := time.Now().UnixMilli()
		if _, err := store.RegisterInstance(ctx, "old", nowMs-60_000, 0); err != nil {
			t.Fatal(err)
		}
		live, err := store.RegisterInstance(ctx, "A", nowMs, nowMs-10_000)
		if err != nil || !slices.Equal(live, []string{"A"}) {
			t.Fatalf("live instances %v err %v", live, err)
		}
		if err := store.SeeLayout(ctx, "A", 1, nowMs); err != nil {
			t.Fatal(err)
		}
		if seen, err := store.LayoutSeen(ctx, nowMs-10_000); err != nil || seen["A"].Epoch != 1 {
			t.Fatalf("layout seen %v err %v", seen, err)
		}
	})

	t.Run("layout, scale and status", func(t *testing.T) {
		l, err := store.SetLayout(ctx, 0, shard.Layout{Count: n, SinceMs: now})
		if err != nil || l.Epoch != 1 {
			t.Fatalf("set layout: %+v %v", l, err)
		}
		if _, err := store.SetLayout(ctx, 0, shard.Layout{Count: 2 * n}); !errors.Is(err, shard.ErrLayoutChanged) {
			t.Fatalf("set layout over a newer one: %v, want ErrLayoutChanged", err)
		}
		l, err = rebalance.Scale(ctx, store, 2*n, time.Now())
		if err != nil || l.Count != 2*n || l.Previous != n {
			t.Fatalf("scale: %+v %v", l, err)
		}
		if err := store.SetProgress(ctx, shard.Progress{Epoch: l.Epoch, Misplaced: 3, Moved: 1}); err != nil {
			t.Fatal(err)
		}
		st, err := inspect.ReadStatus(ctx, store, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Shards) != 2*n || !st.Migration.Active || st.Migration.Misplaced != 3 || st.Partitions != 4 {
			t.Fatalf("status %+v", st)
		}
		misplaced, total, err := inspect.CountMisplaced(ctx, store, l)
		if err != nil || total != st.Tracked || misplaced == 0 {
			t.Fatalf("misplaced %d of %d (tracked %d) err %v", misplaced, total, st.Tracked, err)
		}
	})

	t.Run("keys live on the master of their slot", func(t *testing.T) {
		// Ask every master what it holds: each holds some shards'
		// deadlines, and no key sits anywhere but on its slot's master.
		var mu sync.Mutex
		holders := map[string][]string{}
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			var cursor uint64
			for {
				ks, next, err := m.Scan(ctx, cursor, keys.Prefix()+":*", 1000).Result()
				if err != nil {
					return err
				}
				for _, k := range ks {
					owner, err := cc.MasterForKey(ctx, k)
					if err != nil {
						return err
					}
					if owner.Options().Addr != m.Options().Addr {
						t.Errorf("key %s found on %s, its slot's master is %s", k, m.Options().Addr, owner.Options().Addr)
					}
				}
				// ForEachMaster runs the masters concurrently.
				mu.Lock()
				holders[m.Options().Addr] = append(holders[m.Options().Addr], ks...)
				mu.Unlock()
				if cursor = next; cursor == 0 {
					return nil
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(holders) != 3 {
			t.Fatalf("keys on %d masters, want 3", len(holders))
		}
		for addr, ks := range holders {
			d := 0
			for _, k := range ks {
				if strings.HasSuffix(k, ":deadlines") {
					d++
				}
			}
			if d == 0 {
				t.Errorf("master %s holds no shard's deadlines (keys %v)", addr, ks)
			}
			t.Logf("master %s: %d keys, %d deadlines sets", addr, len(ks), d)
		}
	})

	// Last: it stops a master.
	t.Run("a read across masters fails when one is down", func(t *testing.T) {
		// The two-shard rule reads a device's copies in both its shards,
		// often on two masters. A master that does not answer must fail the
		// read, even when an earlier reply in the pipeline was a plain "no
		// such member": taking the unanswered copy as absent would fire a
		// device whose other copy holds a later deadline.
		mA, err := cc.MasterForKey(ctx, keys.Deadlines(0))
		if err != nil {
			t.Fatal(err)
		}
		other := -1
		for i := 1; i < n && other < 0; i++ {
			m, err := cc.MasterForKey(ctx, keys.Deadlines(i))
			if err != nil {
				t.Fatal(err)
			}
			if m.Options().Addr != mA.Options().Addr {
				other = i
			}
		}
		mB, _ := cc.MasterForKey(ctx, keys.Deadlines(other))
		for _, node := range c.Nodes() {
			if node.Addr() == mB.Options().Addr {
				node.Stop()
			}
		}
		tracked := ""
		for k, id := range ids {
			if home[k] == other && k != 10 && k != 20 { // those two left above
				tracked = id
				break
			}
		}
		copies, err := store.Copies(ctx, []int{0, other}, []string{"nobody", tracked})
		if err == nil {
			t.Fatalf("copies with shard %d's master %s down: no error, %+v", other, mB.Options().Addr, copies)
		}
		// go-redis retries the unanswered master for a few seconds first.
		t.Logf("copies with a master down: %v", err)
	})
}

// scriptSHAs are the SHA1 digests of shard/scripts/*.lua, the names under
// which EVALSHA finds them.
func scriptSHAs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "shard", "scripts", "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts found: %v", err)
	}
	var out []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(src)
		out = append(out, hex.EncodeToString(sum[:]))
	}
	return out
}

func flushScripts(t *testing.T, ctx context.Context, cc *redis.ClusterClient) {
	t.Helper()
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
}

// redisStatus is the redis object of inst's /status. Right after a
// failover it may fail (a pooled connection to the dead primary): callers
// that wait for a state retry it.
func redisStatus(inst *e2etest.Instance) (redisconn.Status, error) {
	body, err := e2etest.HTTPGet("http://" + inst.HTTP.Addr() + "/status")
	if err != nil {
		return redisconn.Status{}, err
	}
	var st struct {
		Redis redisconn.Status `json:"redis"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return redisconn.Status{}, fmt.Errorf("decode /status: %w", err)
	}
	return st.Redis, nil
}
