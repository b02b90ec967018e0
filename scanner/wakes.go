package scanner

import (
	"context"
	"log/slog"
	"sync"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/internal/testsignal"
	"github.com/flatline-dev/flatline/shard"
)

// Wakes carries the wake-ups of writes between instances. A write of a
// deadline that a shard's scanner may not see in time (shard.Wakes)
// announces its shard through Announce: this process's scanner of the shard
// passes at once, and for a shard scanned elsewhere Run publishes the
// announcement on the wakes channel. Run also listens on that channel and
// wakes this process's scanners for the announcements of the others.
//
// A scanner that passes because of an announcement reads after the write
// (the announcement follows the write), so it sees the deadline and sets
// its timer for it. Announcements published while the subscription was
// down are lost: after every subscription go-redis confirms, the first
// included, every shard of this process passes once. A publish that fails
// is not retried: the poll finds the deadline within scanner.interval.
type Wakes struct {
	store   *shard.Store
	scanner *Scanner // nil: this process scans nothing, it only announces
	log     *slog.Logger

	mu     sync.Mutex
	queued []int // to publish, once each (marked)
	marked [shard.MaxShards]bool
	spare  []int // Run's: the buffer queued swaps with
	kick   chan struct{}

	publish retry.Outage

	TestSignals WakesTestSignals
}

// WakesTestSignals tell the tests that Init them what a Wakes did
// (internal/testsignal); off, they cost a nil check.
type WakesTestSignals struct {
	// Subscribed receives after every subscription go-redis confirmed.
	Subscribed testsignal.Signal[struct{}]
}

// Init turns every signal on; call it before Run.
func (ts *WakesTestSignals) Init(tb testsignal.TB) { ts.Subscribed.Init(tb) }

// WakesOptions wire a Wakes.
type WakesOptions struct {
	Store *shard.Store
	// Scanner is this process's, woken by the wake-ups of its writes and of
	// the other instances'; nil when this process runs no scanners.
	Scanner *Scanner
	Log     *slog.Logger
}

// NewWakes returns the wake-ups between this process's writes and the
// scanners, here and on the other instances.
func NewWakes(opts WakesOptions) *Wakes {
	return &Wakes{store: opts.Store, scanner: opts.Scanner, log: opts.Log, kick: make(chan struct{}, 1),
		publish: retry.Outage{Log: opts.Log,
			Down: "cannot publish wake-ups: other instances see this one's soon deadlines at their next poll (an ACL user needs &<key_prefix>:*)",
			Up:   "publishing wake-ups again"}}
}

// Announce is shard.Wakes.Announce: it wakes this process's scanners of
// shards, and queues the others for Run to publish. It never blocks.
func (w *Wakes) Announce(shards []int) {
	var elsewhere []int
	for _, i := range shards {
		if w.scanner == nil || !w.scanner.wake(i) {
			elsewhere = append(elsewhere, i)
		}
	}
	if len(elsewhere) == 0 {
		return // all scanned here, and woken
	}
	w.mu.Lock()
	for _, i := range elsewhere {
		if !w.marked[i] {
			w.marked[i] = true
			w.queued = append(w.queued, i)
		}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run publishes what Announce queued and, with a scanner, wakes it for the
// other instances' announcements, until ctx is cancelled; it closes its
// subscription before it returns.
func (w *Wakes) Run(ctx context.Context) error {
	var listening sync.WaitGroup
	if w.scanner != nil {
		listening.Go(func() { w.listen(ctx) })
	}
	defer listening.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		}
		w.mu.Lock()
		shards := w.queued
		w.queued = w.spare[:0]
		for _, i := range shards {
			w.marked[i] = false
		}
		w.mu.Unlock()
		if err := w.store.PublishWakes(ctx, shards); err != nil {
			if ctx.Err() == nil {
				w.publish.Failed(err)
			}
		} else {
			w.publish.Succeeded()
		}
		w.spare = shards[:0]
	}
}

// listen wakes the scanner for the announcements on the wakes channel.
func (w *Wakes) listen(ctx context.Context) {
	sub := w.store.SubscribeWakes(ctx)
	defer func() {
		if err := sub.Close(); err != nil {
			w.log.Debug("wakes subscription close", "err", err)
		}
	}()
	for {
		shards, subscribed, ok := sub.Next(ctx)
		if !ok {
			return
		}
		if subscribed {
			w.scanner.wakeAll()
			w.TestSignals.Subscribed.Send(struct{}{})
			continue
		}
		for _, i := range shards {
			w.scanner.wake(i)
		}
	}
}
