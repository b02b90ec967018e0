package e2etest

import (
	"errors"
	"testing"
	"time"
)

// poll is how often Eventually asks again: often enough that a measured
// wait (a takeover, a rebalance) is not rounded up by much. A condition
// that takes longer to check (a status read of 128 shards under -race) is
// asked again only after as long again, so that polling never takes more
// than half of the time and does not load the machine under test.
const poll = 20 * time.Millisecond

// Eventually polls cond until it holds and returns how long that took;
// after timeout it fails the test, naming what it waited for. cond runs on
// the test's goroutine, so it may call t.Fatal itself (a process that died
// need not be waited for).
//
// It is for state that offers no signal to wait on: a child process, a
// broker, what another instance wrote to Redis. Where a component has a
// hook (app.Hooks), a test waits on the hook instead.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyNil(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// EventuallyNil is Eventually for a condition that says why it does not
// hold yet: cond returns nil once it does, and its last error is part of
// the failure.
func EventuallyNil(t testing.TB, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		asked := time.Now()
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			if err == errNotYet {
				t.Fatalf("timed out after %v waiting for %s", timeout, what)
			}
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(max(poll, time.Since(asked)))
	}
}

var errNotYet = errors.New("not yet")
