package testenv_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
)

func TestRedisServersAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Several servers at once must get distinct ports and never see each
	// other's data.
	const n = 4
	servers := make([]*testenv.RedisServer, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i] = testenv.Redis(t)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	addrs := map[string]bool{}
	for i, s := range servers {
		if addrs[s.Addr()] {
			t.Fatalf("address %s handed out twice", s.Addr())
		}
		addrs[s.Addr()] = true
		if err := s.Client(t).Set(ctx, "who", i, 0).Err(); err != nil {
			t.Fatalf("set on %s: %v", s.Addr(), err)
		}
	}
	for i, s := range servers {
		got, err := s.Client(t).Get(ctx, "who").Int()
		if err != nil || got != i {
			t.Fatalf("server %d read %d, %v", i, got, err)
		}
	}
}

func TestRedisRequirePass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Redis(t, "--requirepass", "s3cret")
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("authenticated ping: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("unauthenticated ping: %v, want NOAUTH", err)
	}
}

func TestRedisStopStartKeepsAOFData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Redis(t, "--appendonly", "yes")
	c := s.Client(t)
	if err := c.ZAdd(ctx, "z", redis.Z{Score: 42, Member: "d-1"}).Err(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()

	s.Stop()
	s.Stop() // idempotent
	ctx2, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx2).Err(); err == nil {
		t.Fatal("ping succeeded while the server was stopped")
	}

	s.Start()
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, want the same address %s", s.Addr(), addr)
	}
	got, err := c.ZScore(ctx, "z", "d-1").Result()
	if err != nil || got != 42 {
		t.Fatalf("after restart: score %v, %v; want 42", got, err)
	}
}

func TestRedisStopStartWithoutPersistenceLosesData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testenv.Redis(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Start()
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("after restart without persistence: exists=%d, %v; want 0", n, err)
	}
}

func TestPrefixUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		p := testenv.Prefix(t)
		if seen[p] || !strings.HasPrefix(p, "t") || len(p) != 13 {
			t.Fatalf("bad or repeated prefix %q", p)
		}
		seen[p] = true
	}
}

// TestRedisMissingBinary runs this test binary again without redis-server on
// PATH: outside CI the Redis test skips, in CI it must fail.
func TestRedisMissingBinary(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		testenv.Redis(t)
		t.Fatal("Redis returned without redis-server on PATH")
	}
	t.Parallel()
	for _, tc := range []struct {
		ci       string
		wantFail bool
		wantOut  string
	}{
		{ci: "", wantFail: false, wantOut: "SKIP"},
		{ci: "false", wantFail: false, wantOut: "SKIP"},
		{ci: "true", wantFail: true, wantOut: "CI must not skip"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRedisMissingBinary$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "PATH="+t.TempDir(), "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail || !strings.Contains(string(out), tc.wantOut) {
			t.Errorf("CI=%q: err=%v, want failure=%v with %q; output:\n%s", tc.ci, err, tc.wantFail, tc.wantOut, out)
		}
	}
}
