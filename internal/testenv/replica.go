package testenv

import (
	"context"
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
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), Password: replica.password, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	want := "master_link_status:" + status + "\r\n"
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, want) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " ")
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: replica %s: master link not %s within %v: %s", replica.Addr(), status, timeout, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
