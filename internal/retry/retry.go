// Package retry is the plumbing every long-running part of flatline shares
// for failures it outlives: a doubling backoff, a cancellable sleep, and an
// outage that is logged once when it starts and once when it ends, however
// many tries fail in between.
package retry

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Backoff is a doubling wait between tries: Min after the first failure,
// doubled after each further one, never above Max. The zero Backoff is not
// failing; Reset makes it so again after a success.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns how long to wait after one more failure.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.Min
	case b.cur < b.Max:
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur
}

// Failing reports whether a failure happened since the last Reset.
func (b *Backoff) Failing() bool { return b.cur != 0 }

// Reset ends a run of failures: the next wait is Min again.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits d, or less when ctx ends first; it reports whether the whole
// wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Outage logs a failure that may repeat many times once, at WARN, when it
// starts, and once, at INFO, when it ends. It is safe for concurrent use,
// so parts that fail together (the processors of one ingest generation)
// share one and log one outage.
type Outage struct {
	Log *slog.Logger
	// Down is the WARN message at an outage's start; the failure's error
	// is added as "err".
	Down string
	// Up is the INFO message at its end; "" logs nothing.
	Up   string
	down atomic.Bool
}

// Failed records a failure; the first one of an outage is logged with
// err and attrs. It reports whether this failure started the outage.
func (o *Outage) Failed(err error, attrs ...any) bool {
	if o.down.Load() || !o.down.CompareAndSwap(false, true) {
		return false
	}
	if o.Log != nil {
		o.Log.Warn(o.Down, append(attrs, "err", err)...)
	}
	return true
}

// Succeeded records a success; if it ends an outage that end is logged
// with attrs, and it reports true.
func (o *Outage) Succeeded(attrs ...any) bool {
	if !o.down.Load() || !o.down.CompareAndSwap(true, false) {
		return false
	}
	if o.Log != nil && o.Up != "" {
		o.Log.Info(o.Up, attrs...)
	}
	return true
}

// IsDown reports whether an outage is under way.
func (o *Outage) IsDown() bool { return o.down.Load() }

// Do runs fn until it succeeds or ctx ends, waiting b's backoff between
// tries. Each failure goes to onFail (nil: ignored) before the wait; the
// error returned is fn's last one, or ctx's when ctx ended first.
func Do(ctx context.Context, b Backoff, onFail func(error), fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if onFail != nil {
			onFail(err)
		}
		if !Sleep(ctx, b.Next()) {
			return ctx.Err()
		}
	}
}

// Value is Do for a function that returns a value as well.
func Value[T any](ctx context.Context, b Backoff, onFail func(error), fn func() (T, error)) (T, error) {
	var v T
	err := Do(ctx, b, onFail, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}
