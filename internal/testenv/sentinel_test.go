package testenv_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestRedisSentinel checks the set serves writes through its Sentinels and
// fails over to the replica, which then serves them, once the primary is
// killed.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	start := time.Now()
	s := testenv.RedisSentinel(t, testenv.SentinelOptions{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	t.Logf("primary, replica and 3 sentinels ready in %v: sentinels %v", time.Since(start).Round(time.Millisecond), s.Addrs())
	primary, replica := s.Primary(), s.Replica()
	if primary != s.Servers()[0] || replica != s.Servers()[1] {
		t.Fatalf("primary %s replica %s; want %s then %s", primary.Addr(), replica.Addr(), s.Servers()[0].Addr(), s.Servers()[1].Addr())
	}
	c := s.Client(t)
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	primary.Kill()
	promoted := s.WaitFailover(primary, 30*time.Second)
	t.Logf("failover to %s %v after kill -9 of %s", promoted.Addr(), time.Since(killed).Round(time.Millisecond), primary.Addr())
	if promoted != replica {
		t.Fatalf("promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	if s.Primary() != replica {
		t.Error("Primary does not follow the failover")
	}
	var err error
	for range 100 { // the client learns the new master from the Sentinels
		if err = c.Set(ctx, "k", "after", 0).Err(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
}
