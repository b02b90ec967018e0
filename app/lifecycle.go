package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
)

// part is one long-running piece of the instance. Every part keeps the same
// contract: run returns once its context is cancelled, with nil, or earlier
// with the error that stops the whole instance.
type part struct {
	name string
	run  func(ctx context.Context) error
}

// optional is the part named name that p runs, none when the roles left
// p out (nil).
func optional[P interface {
	*T
	Run(ctx context.Context) error
}, T any](name string, p P) []part {
	if p == nil {
		return nil
	}
	return []part{{name, p.Run}}
}

// closer releases a client once nothing that uses it runs any more.
type closer struct {
	name  string // the warning logged when it fails
	close func() error
}

// stage is a set of parts that stop together. Once they all returned (a
// part's Run returns only when its own work is done: the scanner's after
// its in-flight batches drained, within shutdown_timeout), the closers
// release what no later stage needs.
type stage struct {
	name    string
	parts   []part
	closers []closer
}

// stages declares the stop order; it is written nowhere else. Run starts the
// stages in the reverse order (ingest last) and stops them one after the
// other, each once the one before it has stopped and released.
// Close releases in the same order. A part the roles leave out leaves its
// stage with less to do; it never moves a stage.
func (a *App) stages() []stage {
	ingest := stage{name: "ingest"}
	if a.Ingest != nil {
		ingest.parts = []part{{"ingest", a.Ingest.Run}}
		// The dead-letter writer is ingest's alone.
		ingest.closers = []closer{{"dead-letter writer close", a.Ingest.Close}}
	}
	scanners, leases := stage{name: "scanners"}, stage{name: "leases"}
	if a.scanner != nil {
		scanners.parts = []part{{"scanner", a.scanner.Run}}
		scanners.closers = []closer{{"scanner close", a.scanner.Close}}
		leases.parts = []part{{"leaser", a.Leaser.Run}}
	}
	// The storm namer publishes storm events and counts what dispatch
	// published: it stops with the scanners, before the producers close.
	scanners.parts = append(scanners.parts, optional("storm namer", a.namer)...)
	producers := stage{name: "producers"}
	if a.publisher != nil {
		producers.closers = []closer{{"producer close", a.publisher.Close}}
	}
	shared := stage{name: "shared"}
	shared.parts = slices.Concat(optional("http", a.HTTP), optional("layout", a.Watcher), optional("watermark", a.Gate),
		optional("wakes", a.wakes), optional("maintenance", a.maint), optional("sweeper", a.sweeper))
	if a.HTTP != nil {
		shared.closers = append(shared.closers, closer{"http close", a.HTTP.Close})
	}
	if a.kafka != nil {
		shared.closers = append(shared.closers, closer{"kafka client close", func() error { kafkaconn.CloseClient(a.kafka); return nil }})
	}
	if a.rdb != nil {
		shared.closers = append(shared.closers, closer{"redis close", a.rdb.Close})
	}

	// The stop order, on SIGINT/SIGTERM (ctx cancelled) or the failure of
	// any part. Each stage may rely on every later one still running.
	return []stage{
		// 1. Ingest stops fetching, so nothing new reaches Redis while the
		//    rest stops: a batch already written is committed, one cut short
		//    is re-read by the partition's next owner (never lost).
		ingest,
		// 2. The scanners start no new pass; the batches in flight are
		//    acknowledged by Kafka and removed from their shards, within
		//    shutdown_timeout. Until then they need their leases, the
		//    producers and the layout. The storm namer stops beside them,
		//    writing its last counts.
		scanners,
		// 3. Leases are released and the instance deregisters once nothing
		//    is in flight, so other instances take its shards at once and
		//    find every fired device already removed.
		leases,
		// 4. The producers flush and close: neither the scanners nor ingest
		//    (recovered events) publish any more.
		producers,
		// 5. Last, what every other stage reads: the layout watcher, the
		//    watermark gate, the wake-ups between instances, the
		//    maintenance windows and the sweeper; HTTP, so /readyz and
		//    /metrics answer to the end; then the Redis client.
		shared,
	}
}

// running is a started stage: its parts under one errgroup and the cancel
// that stops them.
type running struct {
	stage
	group errgroup.Group
	stop  context.CancelFunc
}

// Run runs the instance until ctx is cancelled or a part fails, then stops
// it in the order stages declares. It returns the first part's error, or
// nil after a cancellation.
func (a *App) Run(ctx context.Context) error {
	stages := a.stages()
	// The first failure triggers the stop; later ones happen while stopping.
	failed := make(chan error, 1)
	run := make([]*running, len(stages))
	for i := len(stages) - 1; i >= 0; i-- {
		run[i] = a.start(ctx, stages[i], failed)
	}
	if a.HTTP != nil {
		a.log.Info("http listening", "addr", a.HTTP.Addr())
	}
	a.log.Info("flatline running", "roles", a.cfg.Roles, "shards", a.Watcher.Current().Count)

	var runErr error
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case runErr = <-failed:
		a.log.Error("stopping after failure", "err", runErr)
	}
	if err := a.stop(run, runErr, a.cfg.ShutdownTimeout); err != nil {
		return err
	}
	a.log.Info("stopped")
	return runErr
}

// errShutdownTimeout is Run's error when shutdown_timeout passed before
// every stage stopped.
var errShutdownTimeout = errors.New("shutdown_timeout passed before every part stopped")

// stop stops the running stages in order, within timeout for all of them
// (shutdown_timeout bounds the whole shutdown, as a platform's grace
// period does: a stage that hangs must not keep the process from
// exiting). Past it, stop returns errShutdownTimeout, naming the stage
// still stopping, and leaves the rest to the process's exit: what was not
// committed or removed is read again by the next owner.
func (a *App) stop(run []*running, runErr error, timeout time.Duration) error {
	var current atomic.Value // the name of the stage stopping now
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, r := range run {
			current.Store(r.name)
			r.stop()
			if err := r.group.Wait(); err != nil && err != runErr {
				a.log.Warn("failed while stopping", "stage", r.name, "err", err)
			}
			a.release(r.stage)
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		stage, _ := current.Load().(string)
		a.log.Error("shutdown_timeout passed; exiting without waiting further", "shutdown_timeout", timeout, "stage", stage)
		return fmt.Errorf("%w (stage %s still stopping after %s)", errShutdownTimeout, stage, timeout)
	}
}

// start runs the parts of s, each under its own name, on a context only
// Run's stop sequence cancels: cancelling ctx starts that sequence, it does
// not stop every part at once. A failing part reports to failed.
func (a *App) start(ctx context.Context, s stage, failed chan<- error) *running {
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{stage: s, stop: stop}
	for _, p := range s.parts {
		r.group.Go(func() error {
			err := p.run(sctx)
			if err == nil {
				return nil
			}
			err = fmt.Errorf("%s: %w", p.name, err)
			select {
			case failed <- err:
			default:
			}
			return err
		})
	}
	return r
}

// Close releases the clients of an instance that is not running, in the
// stop order: New calls it when it fails half-way, and callers that never
// Run an App call it. Run releases them itself.
func (a *App) Close() {
	for _, s := range a.stages() {
		a.release(s)
	}
}

func (a *App) release(s stage) {
	for _, c := range s.closers {
		if err := c.close(); err != nil {
			a.log.Warn(c.name, "err", err)
		}
	}
}
