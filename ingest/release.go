package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// redisLink is what ingest knows of its own way to Redis: whether the calls
// of its generations (the batches' writes, the watermark raises, the storm
// guard's bookkeeping) are answered. Each goes through attempt, which gives
// it a deadline and records how it ended.
//
// Two spells are tracked.
//
//   - A failing spell runs from a call's first failure, of whatever kind,
//     or from the moment a call has waited slowAnswer without an answer,
//     to the next success. Its start is logged at WARN at once, with the
//     first error as soon as there is one, its course at most every
//     linkLogEvery, its end at INFO.
//   - An unanswered spell runs from the start of a call that got no answer
//     (it failed on the way to Redis or ran out of time) until any call is
//     answered, with an error or without. When it lasts
//     ingest.release_after, Run leaves the consumer group (see member): the
//     instance holds partitions it cannot write, and since firing waits for
//     the lowest watermark, every instance's timeouts would wait with them.
//     An error Redis answered (OOM under noeviction, too few replicas for
//     WAIT, a dataset loading) does not count: every instance meets it, and
//     leaving would help none.
//
// A nil *redisLink (an Ingest that Run did not start) runs calls as they
// come and tracks nothing.
type redisLink struct {
	after time.Duration // ingest.release_after; 0: never leave
	log   *slog.Logger
	now   func() time.Time

	mu         sync.Mutex
	pending    int       // calls under way
	unanswered time.Time // start of the unanswered spell; zero: none
	silent     bool      // a call of the unanswered spell got no answer
	lastFail   time.Time // when a call last got no answer
	failing    time.Time // start of the failing spell; zero: none
	failures   int       // failed calls in the failing spell
	errLogged  bool      // the failing spell's first error was logged
	lastErr    error
	nextLog    time.Time // when the failing spell may be logged again
}

// linkLogEvery bounds how often a failing spell is logged after its start.
const linkLogEvery = 10 * time.Second

// minAttempt is the least time a call gets when the unanswered spell has
// already lasted ingest.release_after: a call begun then (in the moments
// before the generation ends, or a ping while out of the group) still has
// a round trip's chance.
const minAttempt = 500 * time.Millisecond

func newRedisLink(after time.Duration, log *slog.Logger) *redisLink {
	return &redisLink{after: after, log: log, now: time.Now}
}

// attempt runs fn, one call to Redis, with a context that ends by the
// moment the unanswered spell (this call's own, if none is under way)
// reaches ingest.release_after, or minAttempt from now if that is later:
// a call that Redis does not answer returns by the time ingest leaves the
// consumer group, and the generation's goroutines, which kafka-go waits
// for before it leaves, return with it. With release_after 0 the deadline
// is ctx's own. target names the call in the log.
func (l *redisLink) attempt(ctx context.Context, target string, fn func(context.Context) error) error {
	if l == nil {
		return fn(ctx)
	}
	actx, cancel := l.begin(ctx)
	defer cancel()
	err := fn(actx)
	// Cut short by its caller (the generation ended) before its own
	// deadline: Redis had no say, or none that came back.
	dl, _ := actx.Deadline()
	l.end(target, err, err != nil && ctx.Err() != nil && (dl.IsZero() || l.now().Before(dl)))
	return err
}

// bounded is ctx with the deadline attempt would give a call now, for calls
// that report no error of their own (the storm guard's bookkeeping): they
// do not move the spells, but return in time.
func (l *redisLink) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if l == nil || l.after <= 0 {
		return ctx, func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.unanswered
	if start.IsZero() {
		start = l.now()
	}
	return context.WithDeadline(ctx, l.deadline(start))
}

// deadline is when a call begun now must end, the unanswered spell having
// started at start. l.mu is held.
func (l *redisLink) deadline(start time.Time) time.Time {
	now := l.now()
	return now.Add(max(start.Add(l.after).Sub(now), minAttempt))
}

func (l *redisLink) begin(ctx context.Context) (context.Context, context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unanswered.IsZero() {
		l.unanswered = l.now()
	}
	l.pending++
	if l.after <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, l.deadline(l.unanswered))
}

// end records how a call begun with begin ended: err, and whether its
// caller cut it short (which says nothing of Redis).
func (l *redisLink) end(target string, err error, cutShort bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending--
	now := l.now()
	switch {
	case err == nil:
		l.answered(now)
		if !l.failing.IsZero() {
			l.log.Info("ingest resumed: redis answers again", "target", target,
				"after", now.Sub(l.failing).Round(time.Millisecond), "failures", l.failures)
			l.failing, l.failures, l.errLogged, l.lastErr = time.Time{}, 0, false, nil
		}
	case cutShort:
		// The caller gave up before Redis had its say: this says nothing
		// of Redis. A spell that only this call started ends with it.
		if l.pending == 0 && !l.silent {
			l.unanswered = time.Time{}
		}
	default:
		if redisAnswered(err) {
			l.answered(now)
		} else {
			l.silent, l.lastFail = true, now
		}
		l.failures++
		l.lastErr = err
		if l.failing.IsZero() {
			l.failing = now
		}
		switch {
		case !l.errLogged:
			l.errLogged, l.nextLog = true, now.Add(linkLogEvery)
			l.log.Warn("ingest paused: redis write failed, retrying without committing", "target", target, "err", err)
		case !now.Before(l.nextLog):
			l.nextLog = now.Add(linkLogEvery)
			l.log.Warn("redis writes still failing; ingest paused", "target", target,
				"for", now.Sub(l.failing).Round(time.Millisecond), "failures", l.failures, "err", err)
		}
	}
}

// answered ends the unanswered spell, or starts a new one with the calls
// still under way. l.mu is held.
func (l *redisLink) answered(now time.Time) {
	l.silent = false
	if l.pending > 0 {
		l.unanswered = now
	} else {
		l.unanswered = time.Time{}
	}
}

// linkState is what unansweredFor says of the link.
type linkState struct {
	// unanswered is how long the unanswered spell has lasted (0: none).
	unanswered time.Duration
	// current: a call is waiting now, or one got no answer within the last
	// staleAfter. A spell that is not current says little of the link as
	// it is now (nothing called Redis since: a rebalance, an idle
	// generation): a ping tells.
	current bool
	err     error // the failing spell's last error
}

// staleAfter is how long after a call's failure, with no call under way,
// the unanswered spell still counts as current.
const staleAfter = time.Second

// unansweredFor says how the unanswered spell stands. A spell that lasted
// slowAnswer starts the failing spell, logged at once, if none is under
// way: a call that Redis does not answer at all fails only by its
// deadline.
func (l *redisLink) unansweredFor() linkState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unanswered.IsZero() {
		return linkState{}
	}
	now := l.now()
	d := now.Sub(l.unanswered)
	if d >= l.slowAnswer() && l.failing.IsZero() && l.pending > 0 {
		l.failing, l.nextLog = l.unanswered, now.Add(linkLogEvery)
		l.log.Warn("ingest paused: redis has not answered a write, retrying without committing", "waited", d.Round(time.Millisecond))
	}
	return linkState{unanswered: d, current: l.pending > 0 || now.Sub(l.lastFail) < staleAfter, err: l.lastErr}
}

// silentFor is how long the unanswered spell has lasted, with the last
// error, when it says something of the link now: a call of it got no
// answer (current as in unansweredFor), or one is still waiting after
// slowAnswer. Otherwise 0. Unlike unansweredFor it logs nothing.
func (l *redisLink) silentFor() (time.Duration, error) {
	if l == nil {
		return 0, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unanswered.IsZero() {
		return 0, nil
	}
	now := l.now()
	d := now.Sub(l.unanswered)
	switch {
	case l.silent && (l.pending > 0 || now.Sub(l.lastFail) < staleAfter):
		return d, l.lastErr
	case l.pending > 0 && d >= l.slowAnswer():
		return d, l.lastErr
	}
	return 0, nil
}

// slowAnswer is how long a call may wait for Redis before the wait is
// logged: a second, or half of ingest.release_after when that is shorter.
func (l *redisLink) slowAnswer() time.Duration {
	if l.after > 0 {
		return min(time.Second, l.after/2)
	}
	return time.Second
}

// redisAnswered reports whether err is Redis's own answer (an error reply, or
// WAIT counting too few replicas) rather than a call that never got one:
// refused or reset on the way, or out of time.
func redisAnswered(err error) bool {
	if errors.Is(err, shard.ErrNotReplicated) {
		return true
	}
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// watchLink looks at the link of in's Redis calls until ctx ends (false)
// or, with ingest.release_after set, until their unanswered spell lasts
// that long, current, while the generation owns partitions (true). A spell
// that is not current, or one while the generation owns no partition
// (nothing calls Redis to end it, and nothing is held by it), is put to a
// ping instead.
func (in *Ingest) watchLink(ctx context.Context) bool {
	after := in.cfg.ReleaseAfter
	t := time.NewTicker(releaseTick(after))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		st := in.link.unansweredFor()
		if after <= 0 || st.unanswered < after {
			continue
		}
		owned := in.Owned()
		if len(owned) == 0 || !st.current {
			_ = in.link.attempt(ctx, "ping", in.opts.Store.Ping)
			continue
		}
		attrs := []any{"release_after", after, "unanswered", st.unanswered.Round(time.Millisecond), "partitions", len(owned)}
		if st.err != nil {
			attrs = append(attrs, "err", st.err)
		}
		in.opts.Log.Warn("leaving the consumer group: redis did not answer ingest's writes for ingest.release_after; the other instances take its partitions", attrs...)
		return true
	}
}

// releaseTick is how often the link is looked at: a twentieth of
// ingest.release_after, within [10ms, 100ms].
func releaseTick(after time.Duration) time.Duration {
	if after <= 0 {
		return 100 * time.Millisecond
	}
	return min(max(after/20, 10*time.Millisecond), 100*time.Millisecond)
}

// stays is how long ingest stays out of the consumer group once it left:
// at least ingest.release_after, doubled each time it has to leave again
// within maxStay of joining, up to maxStay (twelve times release_after).
// A link that flaps costs the fleet two rebalances per cycle; the doubling
// spaces them out.
type stays struct {
	base, max time.Duration
	cur       time.Duration
	rejoined  time.Time // zero: never left
}

func newStays(after time.Duration) *stays { return &stays{base: after, max: 12 * after} }

// next is the least stay out for a release at now.
func (s *stays) next(now time.Time) time.Duration {
	if s.cur == 0 || s.rejoined.IsZero() || now.Sub(s.rejoined) >= s.max {
		s.cur = s.base
	} else {
		s.cur = min(2*s.cur, s.max)
	}
	return s.cur
}

// pingEvery is how often Redis is asked while ingest is out of the group.
const pingEvery = 250 * time.Millisecond

// stayOut waits, out of the consumer group, for at least least and until
// Redis answers a ping; it returns false if ctx ended first.
func (in *Ingest) stayOut(ctx context.Context, least time.Duration) bool {
	m := in.opts.Metrics
	if m != nil {
		m.IngestReleased.Set(1)
		defer m.IngestReleased.Set(0)
	}
	left := time.Now()
	for retry.Sleep(ctx, pingEvery) {
		err := in.link.attempt(ctx, "ping", in.opts.Store.Ping)
		if err == nil && time.Since(left) >= least {
			in.opts.Log.Info("rejoining the consumer group: redis answers again", "out", time.Since(left).Round(time.Millisecond))
			return true
		}
	}
	return false
}
