package testenv

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaLinkTimeout bounds how long a fresh replica may take to finish its
// first sync with its primary.
const replicaLinkTimeout = 30 * time.Second

// RedisReplica starts a private redis-server (with extraArgs, as Redis)
// replicating primary, and returns once its replication link is up, so
// everything primary held then is on the replica. A primary that requires
// authentication needs "--masteruser"/"--masterauth" in extraArgs.
func RedisReplica(t testing.TB, primary *RedisServer, extraArgs ...string) *RedisServer {
	t.Helper()
	args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}, extraArgs...)
	r := Redis(t, args...)
	WaitReplicaLink(t, r, "up", replicaLinkTimeout)
	return r
}

// WaitReplicaLink polls INFO replication of replica until its
// master_link_status is status ("up" or "down"), failing the test after
// timeout.
func WaitReplicaLink(t testing.TB, replica *RedisServer, status string, timeout time.Duration) {
	t.Helper()
	want := "master_link_status:" + status + "\r\n"
	waitReplication(t, replica, "master link "+status, timeout, func(info string) bool { return strings.Contains(info, want) })
}

// WaitRole polls INFO replication of n until it reports role (master or
// slave), and for a replica its link up, failing the test after timeout.
func WaitRole(t testing.TB, n *RedisServer, role string, timeout time.Duration) {
	t.Helper()
	waitReplication(t, n, "role "+role, timeout, func(info string) bool {
		return strings.Contains(info, "role:"+role+"\r\n") && (role == "master" || strings.Contains(info, "master_link_status:up"))
	})
}

// waitReplication polls INFO replication of n until holds says it holds,
// failing the test after timeout with what n answered last.
func waitReplication(t testing.TB, n *RedisServer, what string, timeout time.Duration, holds func(info string) bool) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: n.password, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	err := poll(time.Now().Add(timeout), func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !holds(info) {
			return errors.New(strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " "))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: %s: not %s within %v: %v", n.Addr(), what, timeout, err)
	}
}
