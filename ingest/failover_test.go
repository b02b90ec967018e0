package ingest_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// A primary failover after the replica fell behind: heartbeats are written
// to the primary while its replica's link is cut (the replication user
// disabled and its connection killed, so the replica cannot come back),
// then the primary dies and the replica is promoted. With
// redis.wait_replicas 1 ingest commits none of those heartbeats (WAIT finds
// no replica) and writes them again to the promoted replica: no reset
// acknowledged by a commit is lost. With 0 the same scenario loses them —
// the control that shows the scenario does leave the replica behind.
func TestFailoverToLaggingReplicaLosesNoReset(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		replicas int
	}{{"wait_replicas 1", 1}, {"wait_replicas 0", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lost := failoverAfterLag(t, c.replicas)
			switch {
			case c.replicas > 0 && lost > 0:
				t.Errorf("%d devices lost their last reset in the failover", lost)
			case c.replicas == 0 && lost == 0:
				t.Error("without WAIT no reset was lost: the replica did not fall behind, the scenario proves nothing")
			default:
				t.Logf("%d devices lost their last reset in the failover", lost)
			}
		})
	}
}

// failoverAfterLag runs the scenario with redis.wait_replicas replicas and
// returns how many devices the promoted replica has without their last
// heartbeat once ingest has committed everything.
func failoverAfterLag(t *testing.T, replicas int) int {
	const (
		devices = 200
		pass    = "repl-secret"
	)
	ctx := testenv.Context(t, 2*time.Minute)
	primary := testenv.Redis(t, "--user", "repl", "on", ">"+pass, "~*", "&*", "+@all")
	replica := testenv.RedisReplica(t, primary, "--masteruser", "repl", "--masterauth", pass)

	// The store's client dials whichever server is the primary now, as a
	// Sentinel client or a DNS name moved by the failover would.
	var target atomic.Value
	target.Store(primary.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr: "primary",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, target.Load().(string))
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	store := shard.New(rdb, shard.Options{
		Keys: shard.NewKeys(testenv.Prefix(t)), Durability: shard.Durability{Replicas: replicas, Timeout: 200 * time.Millisecond},
	})
	if err := store.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	r := &rig{kafka: testenv.Kafka(t, 4, signals, dlq, "device-timeouts"), store: store, redis: primary, stop: func() {},
		metrics: metrics.New(metrics.Options{}), committed: make(chan map[int]int64, 1000), have: make(map[int]int64)}
	r.kcfg = kafkaconn.DefaultConfig()
	r.kcfg.Brokers = r.kafka.Brokers()
	r.kcfg.GroupID = "g-" + testenv.Prefix(t)
	r.start(t, ingest.DefaultConfig())

	ids := make([]string, devices)
	for k := range ids {
		ids[k] = fmt.Sprintf("dev-%03d", k)
	}
	// beats produces one heartbeat per device.
	beats := func() {
		now := time.Now()
		msgs := make([]kafka.Message, len(ids))
		for k, id := range ids {
			msgs[k] = kafka.Message{Key: []byte(id), Value: []byte(`{"ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`), Time: now}
		}
		r.produce(t, msgs...)
	}
	// read returns the deadline scores server c holds of the devices (a
	// heartbeat's time is capped by its fetch, so a test cannot know it in
	// advance).
	read := func(c *redis.Client) map[string]float64 {
		out := make(map[string]float64, len(ids))
		for _, id := range ids {
			got, err := c.ZScore(ctx, store.Keys().Deadlines(shard.Of(shard.Hash(id), 4)), id).Result()
			if err == nil {
				out[id] = got
			}
		}
		return out
	}
	// behind counts the devices whose score in have is below want's.
	behind := func(have, want map[string]float64) int {
		n := 0
		for _, id := range ids {
			if have[id] < want[id] {
				n++
			}
		}
		return n
	}
	pc, rc := primary.Client(t), replica.Client(t)

	// Everything written before the cut is on the replica.
	beats()
	r.waitCommitted(t, r.endOffsets(t))
	first := read(pc)
	if len(first) != devices {
		t.Fatalf("%d of %d devices tracked", len(first), devices)
	}
	e2etest.Eventually(t, 10*time.Second, "the first heartbeats on the replica", func() bool { return behind(read(rc), first) == 0 })

	// The cut: the replica loses its link and cannot log in again.
	if err := pc.Do(ctx, "acl", "setuser", "repl", "off").Err(); err != nil {
		t.Fatal(err)
	}
	if err := pc.Do(ctx, "client", "kill", "user", "repl").Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitReplicaLink(t, replica, "down", 10*time.Second)
	committedBefore := r.committedOffsets(t)
	errs0 := testutil.ToFloat64(r.metrics.IngestErrors)

	time.Sleep(5 * time.Millisecond) // a later ts than the first heartbeats'
	beats()
	end := r.endOffsets(t)
	if replicas == 0 {
		r.waitCommitted(t, end)
	} else {
		// Written to the primary, never confirmed: nothing committed. Only
		// the batches the writer had in flight when WAIT began to fail
		// reach the primary (the next waits for the one it retries), so
		// some devices, not necessarily all.
		e2etest.Eventually(t, 10*time.Second, "second heartbeats on the primary", func() bool { return behind(first, read(pc)) > 0 })
		e2etest.Eventually(t, 10*time.Second, "a batch WAIT did not confirm", func() bool {
			return testutil.ToFloat64(r.metrics.IngestErrors) > errs0
		})
		if got := r.committedOffsets(t); fmt.Sprint(got) != fmt.Sprint(committedBefore) {
			t.Fatalf("offsets committed from %v to %v while no replica confirmed", committedBefore, got)
		}
	}
	second := read(pc)
	moved := behind(first, second)
	if replicas == 0 && moved != devices {
		t.Fatalf("%d of %d devices have a later deadline on the primary after the second heartbeats, all committed", moved, devices)
	}
	if n := behind(read(rc), second); n != moved {
		t.Fatalf("%d of the %d second heartbeats on the primary reached the cut replica", moved-n, moved)
	}

	// The failover: the primary dies, the replica is promoted, and the
	// client follows it. The old primary's place as a replica is taken
	// by a fresh server, so WAIT can confirm again.
	primary.Kill()
	if err := rc.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	target.Store(replica.Addr())
	if replicas > 0 {
		testenv.RedisReplica(t, replica)
	}
	r.waitCommitted(t, end)
	return behind(read(rc), second)
}
