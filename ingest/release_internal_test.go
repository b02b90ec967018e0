package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// linkAt is a redisLink with release_after after on a clock the test
// moves, logging into the returned buffer.
func linkAt(now *time.Time, after time.Duration) (*redisLink, *testenv.SyncBuffer) {
	var logs testenv.SyncBuffer
	l := newRedisLink(after, slog.New(slog.NewTextHandler(&logs, nil)))
	l.now = func() time.Time { return *now }
	return l, &logs
}

// replyErr is an error Redis answered with (go-redis's redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A call Redis does not answer starts the unanswered spell, logged at WARN
// once it waited slowAnswer and again, with its error, when it fails; the
// spell lasts until an answer, so it reaches release_after across failed
// retries; an error Redis answered ends it (but not the failing spell),
// and a success ends both, logged at INFO.
func TestRedisLinkSpells(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	l, logs := linkAt(&now, 5*time.Second)
	ok := func(context.Context) error { return nil }
	if err := l.attempt(context.Background(), "deadlines", ok); err != nil {
		t.Fatal(err)
	}
	if d := l.unansweredFor().unanswered; d != 0 {
		t.Fatalf("unanswered for %v after a success", d)
	}

	// A call that hangs: its deadline is release_after after its start.
	ctx, cancel := l.begin(context.Background())
	defer cancel()
	if dl, _ := ctx.Deadline(); !dl.Equal(now.Add(5 * time.Second)) {
		t.Errorf("first call's deadline %v after its start, want release_after", dl.Sub(now))
	}
	start := now
	now = now.Add(600 * time.Millisecond)
	l.unansweredFor()
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a call 600ms without an answer was logged:\n%s", logs)
	}
	now = now.Add(500 * time.Millisecond)
	if st := l.unansweredFor(); st.unanswered != 1100*time.Millisecond || !st.current {
		t.Errorf("link %+v, want unanswered for 1.1s, current", st)
	}
	if n := strings.Count(logs.String(), "redis has not answered a write"); n != 1 {
		t.Fatalf("%d WARN lines for a call waiting 1.1s, want 1:\n%s", n, logs)
	}
	now = start.Add(5 * time.Second)
	l.end("deadlines", fmt.Errorf("write deadlines: %w", context.DeadlineExceeded), false)
	if !strings.Contains(logs.String(), `msg="ingest paused: redis write failed, retrying without committing" target=deadlines err="write deadlines: context deadline exceeded"`) {
		t.Fatalf("the first failure not logged with its error:\n%s", logs)
	}
	// Retries begun past release_after get minAttempt; the spell goes on.
	refused := fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)
	for k := range 20 {
		now = now.Add(100 * time.Millisecond)
		ctx, cancel := l.begin(context.Background())
		if dl, _ := ctx.Deadline(); k == 0 && !dl.Equal(now.Add(minAttempt)) {
			t.Errorf("a call begun past release_after has %v, want %v", dl.Sub(now), minAttempt)
		}
		cancel()
		l.end("deadlines", refused, false)
	}
	if st := l.unansweredFor(); st.unanswered != 7*time.Second || !st.current || !errors.Is(st.err, syscall.ECONNREFUSED) {
		t.Errorf("link %+v, want unanswered for 7s, current, connection refused", st)
	}
	now = now.Add(staleAfter)
	if st := l.unansweredFor(); st.current {
		t.Errorf("link %+v %v after the last failure, with no call under way: want not current", st, staleAfter)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 2 {
		t.Errorf("%d WARN lines within 7s of failures, want 2 (at most one per %v after the first):\n%s", n, linkLogEvery, logs)
	}
	now = start.Add(15 * time.Second)
	_, cancel = l.begin(context.Background())
	cancel()
	l.end("deadlines", refused, false)
	if n := strings.Count(logs.String(), "redis writes still failing"); n != 1 {
		t.Errorf("%d \"still failing\" lines 15s into the failures, want 1:\n%s", n, logs)
	}

	// Redis answering with an error: the link is up, the writes still fail.
	for _, err := range []error{replyErr("OOM command not allowed when used memory > 'maxmemory'"), fmt.Errorf("write: %w", shard.ErrNotReplicated)} {
		_, cancel := l.begin(context.Background())
		cancel()
		l.end("deadlines", err, false)
		if d := l.unansweredFor().unanswered; d != 0 {
			t.Errorf("after %q: unanswered for %v, want 0", err, d)
		}
	}
	if strings.Contains(logs.String(), "level=INFO") {
		t.Fatalf("an error reply logged as a recovery:\n%s", logs)
	}
	// A cancelled call says nothing: a spell it alone started ends with
	// it, one with a call that got no answer goes on.
	_, cancel = l.begin(context.Background())
	cancel()
	now = now.Add(time.Second)
	l.end("deadlines", context.Canceled, true)
	if d := l.unansweredFor().unanswered; d != 0 {
		t.Errorf("after a cancelled call alone: unanswered for %v, want 0", d)
	}
	_, cancel = l.begin(context.Background())
	cancel()
	l.end("deadlines", refused, false)
	_, cancel = l.begin(context.Background())
	cancel()
	now = now.Add(time.Second)
	l.end("deadlines", context.Canceled, true)
	if d := l.unansweredFor().unanswered; d != time.Second {
		t.Errorf("after a refusal and a cancelled call: unanswered for %v, want 1s", d)
	}
	if err := l.attempt(context.Background(), "watermarks", ok); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="ingest resumed: redis answers again" target=watermarks after=17s failures=25`) {
		t.Errorf("the recovery not logged:\n%s", logs)
	}
	if d := l.unansweredFor().unanswered; d != 0 {
		t.Errorf("unanswered for %v after a success", d)
	}
}

// Two calls under way: the answer to one restarts the spell for the other
// rather than ending it.
func TestRedisLinkAnswerRestartsTheSpellOfCallsUnderWay(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	l, _ := linkAt(&now, 5*time.Second)
	_, c1 := l.begin(context.Background())
	defer c1()
	now = now.Add(time.Second)
	_, c2 := l.begin(context.Background())
	defer c2()
	now = now.Add(time.Second)
	l.end("deadlines", nil, false)
	now = now.Add(3 * time.Second)
	if d := l.unansweredFor().unanswered; d != 3*time.Second {
		t.Errorf("unanswered for %v, want 3s since the last answer", d)
	}
}

// With release_after 0 the calls keep their callers' deadlines.
func TestRedisLinkWithoutReleaseAddsNoDeadline(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	l, _ := linkAt(&now, 0)
	ctx, cancel := l.begin(context.Background())
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		t.Errorf("deadline %v with release_after 0", dl)
	}
	if got := l.slowAnswer(); got != time.Second {
		t.Errorf("slowAnswer %v with release_after 0, want 1s", got)
	}
}

// The stay out doubles while the link keeps failing soon after each
// rejoin, up to twelve times release_after, and starts over after a long
// enough stay in.
func TestStaysOutLongerWhenTheLinkFlaps(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	s := newStays(5 * time.Second)
	var got []time.Duration
	for range 6 {
		got = append(got, s.next(now))
		now = now.Add(got[len(got)-1] + time.Second)
		s.rejoined = now
		now = now.Add(10 * time.Second)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stays %v, want %v", got, want)
	}
	now = s.rejoined.Add(time.Minute)
	if d := s.next(now); d != 5*time.Second {
		t.Errorf("stay after a minute in: %v, want 5s", d)
	}
}

func TestRedisAnsweredTellsRepliesFromSilence(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{replyErr("LOADING Redis is loading the dataset in memory"), true},
		{fmt.Errorf("write deadlines: %w", replyErr("OOM")), true},
		{shard.ErrNotReplicated, true},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), false},
		{errors.New("redis: connection pool timeout"), false},
	} {
		if got := redisAnswered(c.err); got != c.want {
			t.Errorf("redisAnswered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// watchLink leaves the group for a current spell of release_after while
// partitions are owned; a spell whose last failure is stale, or one while
// no partition is owned, is put to a ping, which a Redis that answers ends.
func TestWatchLinkLeavesOnlyForACurrentSpell(t *testing.T) {
	t.Parallel()
	store, _ := testenv.Store(t)
	now := time.Now()
	l, logs := linkAt(&now, time.Second)
	in := &Ingest{cfg: Config{ReleaseAfter: time.Second}, opts: Options{Store: store, Log: slog.New(slog.NewTextHandler(logs, nil))}, link: l}
	watch := func(owned map[int]bool) bool {
		in.owned.Store(&owned)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return in.watchLink(ctx)
	}
	fail := func() {
		_, cancel := l.begin(context.Background())
		cancel()
		l.end("deadlines", fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED), false)
	}

	fail()
	now = now.Add(2 * time.Second)
	if watch(map[int]bool{0: true}) {
		t.Error("left the group for a spell whose last failure is 2s old, with Redis answering")
	}
	if d := l.unansweredFor().unanswered; d != 0 {
		t.Errorf("the ping did not end the stale spell: unanswered for %v", d)
	}

	fail()
	now = now.Add(2 * time.Second)
	fail()
	if watch(nil) {
		t.Error("left the group owning no partition")
	}
	fail()
	now = now.Add(2 * time.Second)
	fail()
	if !watch(map[int]bool{0: true}) {
		t.Errorf("stayed in the group through a current spell of 2s:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "leaving the consumer group") {
		t.Errorf("leaving not logged:\n%s", logs)
	}
}

// A call its caller cuts short (the generation ends: kafka-go's context
// reports its own error) says nothing of Redis: no WARN, no spell; one
// that ran to its own deadline meanwhile got no answer, whatever its
// caller did.
func TestRedisLinkIgnoresCallsCutShortByTheirCaller(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	l, logs := linkAt(&now, 5*time.Second)
	ended := errors.New("consumer group generation has ended")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ended)
	err := l.attempt(ctx, "deadlines", func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("write deadlines: %w", context.Cause(ctx))
	})
	if !errors.Is(err, ended) {
		t.Fatalf("attempt returned %v", err)
	}
	if st := l.unansweredFor(); st.unanswered != 0 || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a call cut short by its caller: link %+v, log:\n%s", st, logs)
	}
	err = l.attempt(ctx, "deadlines", func(ctx context.Context) error {
		now = now.Add(5 * time.Second) // Redis kept it to its deadline
		return fmt.Errorf("write deadlines: %w", context.DeadlineExceeded)
	})
	if st := l.unansweredFor(); st.unanswered != 5*time.Second || !strings.Contains(logs.String(), "ingest paused: redis write failed") {
		t.Errorf("a call that ran to its deadline (%v): link %+v, log:\n%s", err, st, logs)
	}
}

// What /readyz reads (silentFor): nothing while calls are answered or
// merely under way; the spell once a call waited slowAnswer or got no
// answer; nothing again once Redis answers, even with an error of its own,
// or once the failure is stale.
func TestRedisLinkSilentFor(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	l, _ := linkAt(&now, 5*time.Second)
	timeout := fmt.Errorf("write deadlines: %w", context.DeadlineExceeded)
	if d, _ := l.silentFor(); d != 0 {
		t.Fatalf("silent for %v before any call", d)
	}
	_, cancel := l.begin(context.Background())
	defer cancel()
	start := now
	now = now.Add(900 * time.Millisecond)
	if d, _ := l.silentFor(); d != 0 {
		t.Fatalf("silent for %v with a call under way 900ms, want 0 (slowAnswer is 1s)", d)
	}
	now = now.Add(200 * time.Millisecond)
	if d, _ := l.silentFor(); d != 1100*time.Millisecond {
		t.Fatalf("silent for %v with a call under way 1.1s, want 1.1s", d)
	}
	now = start.Add(5 * time.Second)
	l.end("deadlines", timeout, false)
	if d, err := l.silentFor(); d != 5*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent for %v (%v) after a call failed, want 5s with its error", d, err)
	}
	now = now.Add(staleAfter)
	if d, _ := l.silentFor(); d != 0 {
		t.Fatalf("silent for %v a second after the last failure with no call under way, want 0", d)
	}
	_, cancel2 := l.begin(context.Background())
	defer cancel2()
	l.end("deadlines", replyErr("OOM command not allowed"), false)
	if d, _ := l.silentFor(); d != 0 {
		t.Fatalf("silent for %v after Redis answered with an error, want 0", d)
	}
	var nilLink *redisLink
	if d, err := nilLink.silentFor(); d != 0 || err != nil {
		t.Fatalf("a nil link: %v, %v", d, err)
	}
}
