package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestShutdownTimeoutBoundsTheWholeShutdown: a stage that does not stop
// does not keep the process from exiting: stop returns
// errShutdownTimeout once shutdown_timeout passed, naming the stage, and
// the stages before it were stopped and released in order.
func TestShutdownTimeoutBoundsTheWholeShutdown(t *testing.T) {
	a := &App{log: slog.New(slog.DiscardHandler)}
	var order []string
	hang := make(chan struct{})
	defer close(hang)
	quick := stage{name: "quick", parts: []part{{"quick", func(ctx context.Context) error { <-ctx.Done(); return nil }}},
		closers: []closer{{"quick close", func() error { order = append(order, "quick released"); return nil }}}}
	stuck := stage{name: "stuck", parts: []part{{"stuck", func(context.Context) error { <-hang; return nil }}}}
	failed := make(chan error, 1)
	run := []*running{a.start(context.Background(), quick, failed), a.start(context.Background(), stuck, failed)}
	start := time.Now()
	err := a.stop(run, nil, 200*time.Millisecond)
	if !errors.Is(err, errShutdownTimeout) {
		t.Fatalf("stop: %v, want errShutdownTimeout", err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("stop returned after %v, before shutdown_timeout", took)
	}
	if len(order) != 1 {
		t.Errorf("released %v, want the quick stage released before the stuck one", order)
	}
	if want := "stage stuck"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the stuck stage", err)
	}
}
