package e2etest

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
)

// Instance is an in-process flatline (app.New + Run).
type Instance struct {
	*app.App
	// Log keeps the instance's info log; it is dumped when the test fails.
	Log *LogBuffer

	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, set before done closes

	once    sync.Once
	stopped bool // by the test, which then owns Run's result
}

// Start runs an instance until Stop or the end of the test. An instance
// the test leaves to the cleanup must not have stopped on its own: Run's
// error then fails the test.
//
// With -v and FLATLINE_TEST_LOGS set, the debug log also goes to stderr.
func Start(t testing.TB, cfg configs.Config, hooks app.Hooks) *Instance {
	t.Helper()
	logs := NewLogBuffer(2000)
	var h slog.Handler = slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})
	if testing.Verbose() && os.Getenv("FLATLINE_TEST_LOGS") != "" {
		h = slog.NewMultiHandler(h, slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, slog.New(h), hooks)
	if err != nil {
		cancel()
		t.Fatalf("start flatline: %v", err)
	}
	logs.DumpOnFailure(t, "flatline "+a.ID())
	inst := &Instance{App: a, Log: logs, cancel: cancel, done: make(chan struct{})}
	go func() {
		inst.err = a.Run(ctx)
		close(inst.done)
	}()
	t.Cleanup(func() {
		if err := inst.stop(); err != nil && !inst.stopped {
			t.Errorf("flatline %s: %v", a.ID(), err)
		}
	})
	return inst
}

// Stop cancels the instance and returns Run's result once it returned.
func (i *Instance) Stop() error {
	i.stopped = true
	return i.stop()
}

func (i *Instance) stop() error {
	i.once.Do(func() {
		i.cancel()
		<-i.done
	})
	return i.err
}

// Exited reports whether Run returned (it must not, before the test stops
// the instance).
func (i *Instance) Exited() bool {
	select {
	case <-i.done:
		return true
	default:
		return false
	}
}

// Err is Run's result once Exited.
func (i *Instance) Err() error {
	if !i.Exited() {
		return nil
	}
	return i.err
}
