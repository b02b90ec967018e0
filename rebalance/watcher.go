package rebalance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// Watcher keeps the current layout of one instance, polled from Redis.
type Watcher struct {
	store    *shard.Store
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	current  shard.Layout
	instance string // set at construction, read only
}

// WatcherOptions is what a Watcher is built from.
type WatcherOptions struct {
	Store  *shard.Store
	Config Config
	// Instance, when set, is recorded at every poll as routing by the
	// layout the watcher loaded (the sweeper finalizes a migration only
	// once every live instance does); "" for a watcher that only reads.
	Instance string
	Log      *slog.Logger
}

// NewWatcher returns a watcher polling the store every Config.PollInterval.
func NewWatcher(opts WatcherOptions) *Watcher {
	return &Watcher{store: opts.Store, interval: opts.Config.PollInterval, log: opts.Log, instance: opts.Instance, now: time.Now}
}

// Init loads the layout, storing {count: initial} first on a fresh
// deployment. It must succeed before anything routes.
func (w *Watcher) Init(ctx context.Context, initial int) (shard.Layout, error) {
	l, err := ensure(ctx, w.store, initial, w.now())
	if err != nil {
		return shard.Layout{}, err
	}
	w.set(l)
	return l, nil
}

// ensure returns the stored layout, storing {count: initial} when there is
// none yet.
func ensure(ctx context.Context, store *shard.Store, initial int, now time.Time) (shard.Layout, error) {
	for {
		l, ok, err := store.Layout(ctx)
		if err != nil {
			return shard.Layout{}, err
		}
		if ok {
			return l, nil
		}
		l, err = store.SetLayout(ctx, 0, shard.Layout{Count: initial, SinceMs: now.UnixMilli()})
		if errors.Is(err, shard.ErrLayoutChanged) {
			continue // another instance initialized it first
		}
		if err != nil {
			return shard.Layout{}, fmt.Errorf("initialize layout: %w", err)
		}
		return l, nil
	}
}

// Current is the layout this instance routes by.
func (w *Watcher) Current() shard.Layout {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

func (w *Watcher) set(l shard.Layout) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l == w.current {
		return false
	}
	w.current = l
	return true
}

// refresh re-reads the layout now.
func (w *Watcher) refresh(ctx context.Context) error {
	l, ok, err := w.store.Layout(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("layout is missing from Redis")
	}
	old := w.Current()
	if w.set(l) && l.Epoch > old.Epoch {
		w.log.Info("layout changed", "count", l.Count, "previous", l.Previous, "epoch", l.Epoch)
	}
	if w.instance != "" {
		return w.store.SeeLayout(ctx, w.instance, l.Epoch, w.now().UnixMilli())
	}
	return nil
}

// Run polls the layout until ctx is cancelled.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	outage := retry.Outage{Log: w.log, Down: "cannot read layout", Up: "layout readable again"}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.refresh(ctx); err != nil {
			if ctx.Err() == nil {
				outage.Failed(err)
			}
			continue
		}
		outage.Succeeded()
	}
}
