package shard_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// With a Durability of one replica a write counts only once the replica has
// it: Write returns with the deadlines on the replica; it fails with
// ErrNotReplicated while the replica cannot confirm (its event loop sleeps:
// DEBUG SLEEP), also when the batch is written again from a fresh
// connection and changes nothing (from Redis 7.2 on a fresh connection's
// WAIT after writes that changed nothing would confirm at once: the shard's
// Sync INCR is what makes it wait; before 7.2 any command moved the
// connection's offset); and it succeeds once the replica is back.
func TestWriteWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary := testenv.Redis(t)
	replica := testenv.RedisReplica(t, primary, "--enable-debug-command", "yes")
	ctx := testenv.Context(t, time.Minute)
	keys := shard.NewKeys(testenv.Prefix(t))
	const shards = 4
	newStore := func() *shard.Store { // a client of its own: fresh connections
		return shard.New(primary.Client(t), shard.Options{Keys: keys,
			Durability: shard.Durability{Replicas: 1, Timeout: 200 * time.Millisecond}})
	}
	st := newStore()
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 50)
	for k := range ids {
		ids[k] = fmt.Sprintf("dev-%02d", k)
	}
	var b shard.Batch
	batch := func(deadline int64) *shard.Batch {
		b.Reset(shards)
		for _, id := range ids {
			b.Add(shard.Of(shard.Hash(id), shards), id, shard.Score(deadline, 0), 0)
		}
		return &b
	}
	rc := replica.Client(t)
	onReplica := func(deadline int64) error {
		for _, id := range ids {
			got, err := rc.ZScore(ctx, keys.Deadlines(shard.Of(shard.Hash(id), shards)), id).Result()
			if err != nil || got != shard.Score(deadline, 0) {
				return fmt.Errorf("%s on the replica: score %v (%v), want deadline %d", id, got, err, deadline)
			}
		}
		return nil
	}

	first := shard.Epoch + 1000
	if _, err := st.Write(ctx, batch(first)); err != nil {
		t.Fatalf("write with the replica linked: %v", err)
	}
	if err := onReplica(first); err != nil {
		t.Fatalf("confirmed, yet not on the replica: %v", err)
	}

	// The replica sleeps: it keeps its link but acknowledges nothing.
	sleeper := redis.NewClient(&redis.Options{Addr: replica.Addr(), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = sleeper.Close() })
	slept := make(chan error, 1)
	go func() { slept <- sleeper.Do(ctx, "debug", "sleep", "3").Err() }()
	probe := redis.NewClient(&redis.Options{Addr: replica.Addr(), ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = probe.Close() })
	for probe.Ping(ctx).Err() == nil {
		time.Sleep(10 * time.Millisecond)
	} // asleep
	second := shard.Epoch + 2000
	if _, err := st.Write(ctx, batch(second)); !errors.Is(err, shard.ErrNotReplicated) {
		t.Fatalf("write while the replica sleeps: %v, want ErrNotReplicated", err)
	}
	// Written again, by a new client: the deadlines are on the master
	// already, the ZADD GT changes nothing.
	if _, err := newStore().Write(ctx, batch(second)); !errors.Is(err, shard.ErrNotReplicated) {
		t.Fatalf("the same batch again from a fresh connection, replica asleep: %v, want ErrNotReplicated", err)
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	// Awake again, as ingest's retry would: confirmed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := newStore().Write(ctx, batch(second))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("write after the replica woke up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := onReplica(second); err != nil {
		t.Fatalf("confirmed, yet not on the replica: %v", err)
	}
}
