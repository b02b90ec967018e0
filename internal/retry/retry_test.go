package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestBackoffDoublesUpToMaxAndResets(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	if b.Failing() {
		t.Fatal("a new backoff is failing")
	}
	var got []time.Duration
	for i := 0; i < 5; i++ {
		got = append(got, b.Next())
	}
	want := []time.Duration{10, 20, 40, 50, 50}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	if !b.Failing() {
		t.Fatal("not failing after failures")
	}
	b.Reset()
	if b.Failing() || b.Next() != 10*time.Millisecond {
		t.Fatal("reset did not start over at Min")
	}
}

func TestOutageIsLoggedOnceEachWay(t *testing.T) {
	var buf bytes.Buffer
	o := &Outage{Log: slog.New(slog.NewTextHandler(&buf, nil)), Down: "paused", Up: "resumed"}
	if o.Succeeded() {
		t.Fatal("a success without an outage ended one")
	}
	started := 0
	for i := 0; i < 5; i++ {
		if o.Failed(errors.New("boom"), "shard", 3) {
			started++
		}
	}
	if started != 1 || !o.IsDown() {
		t.Fatalf("%d failures started an outage, want 1 (down %v)", started, o.IsDown())
	}
	if !o.Succeeded() || o.Succeeded() {
		t.Fatal("the end of an outage is not reported exactly once")
	}
	out := buf.String()
	if strings.Count(out, "msg=paused") != 1 || strings.Count(out, "msg=resumed") != 1 || !strings.Contains(out, "shard=3 err=boom") {
		t.Fatalf("log:\n%s", out)
	}
}

func TestDoRetriesUntilSuccessAndStopsWithCtx(t *testing.T) {
	n, fails := 0, 0
	err := Do(context.Background(), Backoff{Min: time.Microsecond, Max: time.Millisecond}, func(error) { fails++ }, func() error {
		n++
		if n < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 4 || fails != 3 {
		t.Fatalf("err %v after %d tries, %d failures reported; want nil after 4, 3", err, n, fails)
	}
	ctx, cancel := context.WithCancel(context.Background())
	v, err := Value(ctx, Backoff{Min: time.Millisecond, Max: time.Millisecond}, func(error) { cancel() }, func() (int, error) {
		return 7, errors.New("never")
	})
	if !errors.Is(err, context.Canceled) || v != 7 {
		t.Fatalf("Value = %d, %v; want the last value and context.Canceled", v, err)
	}
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended ctx waited")
	}
}
