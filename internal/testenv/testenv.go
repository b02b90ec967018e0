// Package testenv starts the real infrastructure flatline's tests run
// against: a private redis-server per test on a free loopback port (Redis),
// a Redis Cluster with or without replicas (RedisCluster,
// RedisClusterWithReplicas), a master set with a replica and three
// Sentinels (RedisSentinel), an in-process Kafka (franz-go's kfake) reached
// over TCP by the real kafka-go client, and a unique Redis key prefix per
// test. Everything a helper starts is torn down by t.Cleanup; a server can
// be stopped (Stop), crashed (Kill) and restarted (Start) to inject faults.
// Child processes, flatline binaries under test included, start through
// StartProcess with an environment from ChildEnv. The checks tests of
// several packages share live here too: redisconn's configuration on one
// address (RedisConfig), a mounted password file (SecretFile), and a
// refusal that is one line and echoes no password (OneLineError).
//
// It is the test support of the benchmark programs too (bench/cmd): they
// start their redis-server with StartRedis, and flatline-bench and
// flatline-soak their flatline children with StartProcess and SettingsEnv.
// The product binary never imports it.
//
// Tests that need Redis skip when redis-server is not installed, except in CI
// (env CI=true), where a missing binary fails the test: CI must never go green
// by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"
)

// Context returns a context that expires after d and is cancelled when the
// test ends, so a test waiting on a hung broker or server fails after d
// instead of at go test's -timeout. Not t.Context(): it has no deadline.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Prefix returns a Redis key prefix unique to this test ("t" and 12 random
// hex digits), so tests sharing a server never see each other's keys.
func Prefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random prefix: %v", err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// poll calls f every 20 ms, each call bounded by a second, until it
// returns nil or the deadline passes; then it returns f's last error.
func poll(deadline time.Time, f func(context.Context) error) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
