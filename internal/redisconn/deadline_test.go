package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// A call with a deadline returns by it when Redis does not answer at all
// (the link drops every byte, connections open), in every mode New builds
// a client for a single address: long before go-redis's own read timeout
// (5 s) and its retries, which is where it would return if the client
// ignored the deadline. A call without a deadline keeps the socket
// timeouts (not waited for here).
func TestCallsEndByTheirDeadlineWhenRedisDoesNotAnswer(t *testing.T) {
	t.Parallel()
	rs := testenv.Redis(t)
	for _, mode := range []string{redisconn.ModeAuto, redisconn.ModeStandalone} {
		t.Run(mode, func(t *testing.T) {
			p := testenv.Proxy(t, rs.Addr())
			c := redisconn.DefaultConfig()
			c.Mode, c.Addrs = mode, []string{p.Addr()}
			rdb, err := redisconn.New(testenv.Context(t, 10*time.Second), c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdb.Close() })
			if err := rdb.Ping(testenv.Context(t, 10*time.Second)).Err(); err != nil {
				t.Fatalf("ping through the open link: %v", err)
			}
			p.Hang()
			const deadline = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err = rdb.Ping(ctx).Err()
			took := time.Since(start)
			if err == nil {
				t.Fatal("ping through a hung link answered")
			}
			if took >= 3*time.Second {
				t.Errorf("ping with a %v deadline through a hung link returned after %v (%v): the deadline was ignored", deadline, took, err)
			}
			t.Logf("ping with a %v deadline through a hung link: %v after %v", deadline, err, took.Round(time.Millisecond))
		})
	}
}
