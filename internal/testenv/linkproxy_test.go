package testenv_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// A client through the proxy is answered while the link is open; while it
// hangs, its calls time out with its connection still open; once healed it
// is answered again; while the link is reset, its calls fail at once, not
// by their deadline.
func TestLinkProxyHangsResetsAndHeals(t *testing.T) {
	t.Parallel()
	rs := testenv.Redis(t)
	p := testenv.Proxy(t, rs.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	// Long enough that a machine busy with other tests does not delay
	// the proxy's refusal past it.
	const deadline = time.Second
	ping := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		err := rdb.Ping(ctx).Err()
		return time.Since(start), err
	}
	if _, err := ping(); err != nil {
		t.Fatalf("ping through the open link: %v", err)
	}

	// A connection of the test's own, which only the proxy could end: the
	// client's may be closed by go-redis once its call times out.
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })

	p.Hang()
	took, err := ping()
	var nerr net.Error
	if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout()) {
		t.Fatalf("ping through the hung link: %v after %v, want a timeout", err, took)
	}
	if took < deadline {
		t.Errorf("ping through the hung link failed after %v, before its deadline %v", took, deadline)
	}
	if _, err := raw.Write([]byte("PING\r\n")); err != nil {
		t.Fatalf("write through the hung link: %v", err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(deadline))
	if _, err := raw.Read(make([]byte, 16)); !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Errorf("read through the hung link: %v, want a timeout: the hung link ended its connection", err)
	}

	p.Heal()
	var healed error
	for range 3 { // the connection that lost bytes is reset: the first call may meet that
		if _, healed = ping(); healed == nil {
			break
		}
	}
	if healed != nil {
		t.Fatalf("ping after healing: %v", healed)
	}

	p.Reset()
	took, err = ping()
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout() {
		t.Fatalf("ping through the reset link: %v after %v, want a refusal", err, took)
	}
	took, err = ping() // a new connection, reset as it is accepted
	if err == nil || took >= deadline {
		t.Fatalf("second ping through the reset link: %v after %v, want a refusal before the deadline", err, took)
	}

	p.Heal()
	if _, err := ping(); err != nil {
		t.Fatalf("ping after healing the reset: %v", err)
	}
}
