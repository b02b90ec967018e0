package dispatch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// startTail runs Tail into a pipe and returns its lines and its result.
func startTail(t *testing.T, ctx context.Context, brokers []string, fromBeginning bool) (<-chan string, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Tail(ctx, testKafkaConfig(brokers), fromBeginning, pw)
		pw.Close()
		done <- err
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { pr.Close() })
	return lines, done
}

func nextLine(t *testing.T, lines <-chan string, within time.Duration) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-lines:
		return l, ok
	case <-time.After(within):
		return "", false
	}
}

// dueAt is n members due at at, named by format with their index.
func dueAt(format string, n int, at time.Time) []shard.Member {
	due := make([]shard.Member, n)
	for i := range due {
		due[i] = shard.Member{ID: fmt.Sprintf(format, i), Score: shard.Score(at.UnixMilli(), 0)}
	}
	return due
}

func TestTailFromBeginning(t *testing.T) {
	t.Parallel()
	k, p := kafkaPublisher(t, nil)
	ctx := testenv.Context(t, 30*time.Second)

	now := time.Now()
	due := dueAt("d-%d", 20, now)
	want := map[string]bool{}
	for _, m := range due {
		want[TimeoutEventID(m.ID, now.UnixMilli())] = true
	}
	if err := p.Timeouts(ctx, 1, due, nil, now); err != nil {
		t.Fatal(err)
	}
	if err := p.Recovered(ctx, []timeouts.Recovery{{DeviceID: "d-0", DownSinceMs: now.UnixMilli(), SeenAtMs: now.UnixMilli() + 5}}); err != nil {
		t.Fatal(err)
	}
	want[recoveredEventID("d-0", now.UnixMilli()+5)] = true

	tailCtx, stop := context.WithCancel(ctx)
	lines, done := startTail(t, tailCtx, k.Brokers(), true)
	for len(want) > 0 {
		l, ok := nextLine(t, lines, 20*time.Second)
		if !ok {
			t.Fatalf("tail ended or stalled with %d events unseen", len(want))
		}
		var e Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if !want[e.EventID] {
			t.Fatalf("unexpected or repeated line %q", l)
		}
		delete(want, e.EventID)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Tail after cancel = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Tail did not return after cancel")
	}
}

func TestTailFromEnd(t *testing.T) {
	t.Parallel()
	k, p := kafkaPublisher(t, nil)
	ctx := testenv.Context(t, 30*time.Second)

	now := time.Now()
	if err := p.Timeouts(ctx, 0, dueAt("old-%d", 20, now), nil, now); err != nil {
		t.Fatal(err)
	}

	lines, _ := startTail(t, ctx, k.Brokers(), false)
	// Tail positions its readers asynchronously, so publish until a line
	// shows up: whatever it prints must be new, never the old events.
	for i := 0; ; i++ {
		if err := p.Timeouts(ctx, 0, []shard.Member{{ID: fmt.Sprintf("new-%d", i), Score: shard.Score(now.UnixMilli(), 0)}}, nil, now); err != nil {
			t.Fatal(err)
		}
		l, ok := nextLine(t, lines, 200*time.Millisecond)
		if !ok {
			if ctx.Err() != nil {
				t.Fatal("tail printed nothing")
			}
			continue
		}
		if !strings.Contains(l, `"device_id":"new-`) {
			t.Fatalf("tail from the end printed an old event: %s", l)
		}
		return
	}
}

func TestTailUnknownTopic(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, 1, "other")
	ctx := testenv.Context(t, 30*time.Second)
	err := Tail(ctx, testKafkaConfig(k.Brokers()), true, io.Discard)
	if err == nil || !strings.Contains(err.Error(), testTopic) {
		t.Fatalf("Tail of a missing topic = %v, want an error naming it", err)
	}
	t.Log(err)
}
