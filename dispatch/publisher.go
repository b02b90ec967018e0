package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

const (
	// A failed publish is retried after backoffMin, doubling to backoffMax.
	backoffMin = 50 * time.Millisecond
	backoffMax = 2 * time.Second

	// errorLogEvery bounds publish-error logging to one line per period.
	errorLogEvery = 5 * time.Second
)

// errClosed is returned by Timeouts and Recovered after Close.
var errClosed = errors.New("dispatch: publisher closed")

// Options are the collaborators of a Publisher.
type Options struct {
	// Policy resolves class ids and default timeouts. Required.
	Policy *timeouts.Policy
	// PadWindow is ingest.coalesce_window: a score with shard.FlagPadded
	// holds a deadline padded by this much.
	PadWindow time.Duration
	// Metrics receives publish counters and lateness; nil disables them.
	Metrics *metrics.Metrics
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives rate-limited publish errors; nil means slog.Default().
	Logger *slog.Logger
	// StormID is the storm being named now, "" when none is: the storm_id
	// of the timeouts published (namer.Tally.StormID). Nil: none.
	StormID func() string
	// Published counts, for the storm guard, the timeouts (of storm
	// stormID, "" for none) and recoveries Kafka acknowledged
	// (namer.Tally.Published). Nil: nothing counted.
	Published func(timeouts int, stormID string, recoveries int)
}

// Publisher produces timeout and recovered events to the timeouts topic.
// It is safe for concurrent use; one serves all scanners of an instance.
type Publisher struct {
	prod      *producer
	policy    *timeouts.Policy
	padMs     int64
	windowMs  int64 // dispatch.recovery_window; 0: no recovered events
	m         *metrics.Metrics
	now       func() time.Time
	log       *slog.Logger
	errLog    logging.Limiter
	stormID   func() string
	published func(timeouts int, stormID string, recoveries int)
	// refusedOnce holds the reasons no retry fixes already logged.
	refusedOnce sync.Map
	batches     sync.Pool // *batch
}

// New builds a Publisher writing to k.TimeoutsTopic. It does not contact
// Kafka: a broker that is down shows up as retried publish errors.
func New(cfg Config, k kafkaconn.Config, opts Options) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if opts.Policy == nil {
		return nil, errors.New("dispatch: a timeouts policy is required")
	}
	if opts.PadWindow < 0 {
		return nil, fmt.Errorf("dispatch: negative pad window %s", opts.PadWindow)
	}
	prod, err := newProducer(k.Brokers, k.TimeoutsTopic, k.Transport, cfg.Linger, k.Codec())
	if err != nil {
		return nil, err
	}
	p := &Publisher{
		prod:      prod,
		policy:    opts.Policy,
		padMs:     opts.PadWindow.Milliseconds(),
		windowMs:  cfg.RecoveryWindow.Milliseconds(),
		m:         opts.Metrics,
		now:       opts.Now,
		log:       opts.Logger,
		errLog:    logging.Limiter{Every: errorLogEvery},
		stormID:   opts.StormID,
		published: opts.Published,
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With("component", "dispatch")
	return p, nil
}

// batch is the per-call scratch of a publish: every key and value of the
// call in one buffer, the messages slicing it, and each message's deadline
// (for lateness). Batches are pooled; see publish for when one may not be
// reused.
type batch struct {
	buf       []byte
	ends      []int // per message: end of key, end of value in buf
	msgs      []kafka.Message
	deadlines []int64
}

func (p *Publisher) getBatch() *batch {
	if b, ok := p.batches.Get().(*batch); ok {
		return b
	}
	return &batch{}
}

func (p *Publisher) putBatch(b *batch) {
	if cap(b.buf) > 1<<20 {
		return // a one-off burst; do not pin its memory
	}
	b.buf, b.ends, b.deadlines = b.buf[:0], b.ends[:0], b.deadlines[:0]
	clear(b.msgs)
	b.msgs = b.msgs[:0]
	p.batches.Put(b)
}

// grow makes room in b for the timeout events of due at once: a draining
// shard's groups hold up to thousands of members, and growing by doubling
// moved every event encoded so far again and again.
func (b *batch) grow(due []shard.Member) {
	n := 0
	for _, m := range due {
		n += 3*len(m.ID) + timeoutEventFixed
	}
	b.buf = room(b.buf, n)
	b.ends = room(b.ends, 2*len(due))
	b.deadlines = room(b.deadlines, len(due))
	b.msgs = room(b.msgs, len(due))
}

// room returns s with room for n more elements. Unlike slices.Grow it
// copies only s's elements into a larger array, not its whole capacity.
func room[S ~[]E, E any](s S, n int) S {
	if cap(s)-len(s) >= n {
		return s
	}
	grown := make(S, len(s), len(s)+n)
	copy(grown, s)
	return grown
}

// timeoutEventFixed is about the bytes of a timeout event besides its
// device id (twice, once escaped in event_id) and key: field names, four
// 13-digit times, a short class name.
const timeoutEventFixed = 192

// appendKey appends a message's key; call before appending its value.
func (b *batch) appendKey(id string) {
	b.buf = append(b.buf, id...)
	b.ends = append(b.ends, len(b.buf))
}

// endValue marks the end of the value appended after the last key.
func (b *batch) endValue(deadlineMs int64) {
	b.ends = append(b.ends, len(b.buf))
	b.deadlines = append(b.deadlines, deadlineMs)
}

// seal builds the messages once buf no longer grows.
func (b *batch) seal(at time.Time) {
	start := 0
	for i := 0; i < len(b.ends); i += 2 {
		k, v := b.ends[i], b.ends[i+1]
		b.msgs = append(b.msgs, kafka.Message{
			Key:   b.buf[start:k:k],
			Value: b.buf[k:v:v],
			Time:  at,
		})
		start = v
	}
}

// Timeouts publishes the timeout events of due members of shard shardID,
// found due at detectedAt, and returns once Kafka acknowledged all of them.
// overrides holds the per-device timeouts (ms) of members whose score has
// shard.FlagOverride. Failures are retried with backoff until ctx is done,
// when Timeouts returns ctx.Err() and some events may or may not have been
// published.
func (p *Publisher) Timeouts(ctx context.Context, shardID int, due []shard.Member, overrides map[string]int64, detectedAt time.Time) error {
	return p.Noted(ctx, shardID, due, overrides, nil, detectedAt)
}

// noLateness is the deadline of a message whose lateness is not observed
// (timeouts.Note.Held).
const noLateness = -1

// Noted is Timeouts for a group some of whose members' events say more
// than a plain timeout: notes says what, per device (SPEC §14: a device
// whose parent is down is published as unreachable, and unreachable
// events count toward storms like timeouts; §15: a device a maintenance
// window released carries its maintenance_id and no storm_id, and does
// not count toward storms).
func (p *Publisher) Noted(ctx context.Context, shardID int, due []shard.Member, overrides map[string]int64, notes map[string]timeouts.Note, detectedAt time.Time) error {
	if len(due) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b := p.getBatch()
	stormID := ""
	if p.stormID != nil {
		stormID = p.stormID()
	}
	counted, unreachable := p.fillTimeouts(b, shardID, due, overrides, detectedAt, stormID, notes)
	if err := p.publish(ctx, b, TypeTimeout); err != nil {
		return err
	}
	if p.m != nil && unreachable > 0 {
		p.m.UnreachablePublished.Add(float64(unreachable))
	}
	if p.published != nil && counted > 0 {
		p.published(counted, stormID, 0)
	}
	return nil
}

// ClassOf names the class score carries, "" for none.
func (p *Publisher) ClassOf(score float64) string {
	_, meta := shard.DecodeScore(score)
	if cid := meta.ClassID(); cid != 0 {
		if c, ok := p.policy.ByID(cid); ok {
			return c.Name
		}
	}
	return ""
}

// fillTimeouts encodes the events of due into b, each with what notes
// (nil: none) says of it. It returns how many count toward storms (all
// but those a maintenance window released) and how many are unreachable.
func (p *Publisher) fillTimeouts(b *batch, shardID int, due []shard.Member, overrides map[string]int64, detectedAt time.Time, stormID string, notes map[string]timeouts.Note) (counted, unreachable int) {
	detectedMs := detectedAt.UnixMilli()
	b.grow(due)
	for _, mem := range due {
		deadlineMs, timeoutMs, className := p.resolve(mem.ID, mem.Score, overrides)
		n := notes[mem.ID]
		x := extras{parent: n.Parent, stormID: stormID, maintenanceID: n.MaintenanceID, gateway: n.Gateway, childrenHeld: n.ChildrenHeld}
		if n.Unreachable {
			x.typ = TypeUnreachable
			unreachable++
		}
		if n.MaintenanceID != "" {
			x.stormID = "" // a planned silence is no storm's
		} else {
			counted++
		}
		b.appendKey(mem.ID)
		b.buf = appendTimeout(b.buf, mem.ID, deadlineMs-timeoutMs, deadlineMs, detectedMs, timeoutMs, className, shardID, x)
		if n.Held {
			b.endValue(noLateness)
		} else {
			b.endValue(deadlineMs)
		}
	}
	b.seal(detectedAt)
	return counted, unreachable
}

// Timing returns a member's deadline, without padding, and its timeout, as
// its timeout event would report them.
func (p *Publisher) Timing(id string, score float64, overrides map[string]int64) (deadlineMs, timeoutMs int64) {
	deadlineMs, timeoutMs, _ = p.resolve(id, score, overrides)
	return deadlineMs, timeoutMs
}

// StormEvent publishes one storm_started or storm_ended event (value, JSON)
// with the key storm/<id>, and returns once Kafka acknowledged it.
func (p *Publisher) StormEvent(ctx context.Context, id string, value []byte) error {
	b := p.getBatch()
	b.appendKey("storm/" + id)
	b.buf = append(b.buf, value...)
	b.endValue(0)
	b.seal(p.now())
	return p.publish(ctx, b, TypeStorm)
}

// resolve reads a member's score: its deadline (unpadded), its timeout (its
// override from overrides, else its class's, else the default) and its
// class name.
func (p *Publisher) resolve(id string, score float64, overrides map[string]int64) (deadlineMs, timeoutMs int64, className string) {
	deadlineMs, meta := shard.DecodeScore(score)
	if meta.Has(shard.FlagPadded) {
		deadlineMs -= p.padMs
	}
	timeoutMs = p.policy.Default().Milliseconds()
	if cid := meta.ClassID(); cid != 0 {
		if c, ok := p.policy.ByID(cid); ok {
			className = c.Name
			timeoutMs = c.Timeout.Milliseconds()
		}
	}
	if meta.Has(shard.FlagOverride) {
		if o, ok := overrides[id]; ok {
			timeoutMs = o
		}
	}
	return deadlineMs, timeoutMs, className
}

// Raced publishes the recovered events of devices whose reset raced their
// published timeout (shard.Store.Fired): down since the deadline fired,
// seen at the heartbeat their current score was written from.
func (p *Publisher) Raced(ctx context.Context, shardID int, raced []shard.Raced, overrides map[string]int64) error {
	rs := make([]timeouts.Recovery, 0, len(raced))
	for _, r := range raced {
		down, _, _ := p.resolve(r.ID, r.FiredScore, nil)
		deadline, timeout, _ := p.resolve(r.ID, r.Score, overrides)
		if seen := deadline - timeout; seen-down <= p.windowMs {
			rs = append(rs, timeouts.Recovery{DeviceID: r.ID, DownSinceMs: down, SeenAtMs: seen})
		}
	}
	return p.Recovered(ctx, rs)
}

// Recovered publishes recovered events and returns once Kafka acknowledged
// all of them, retrying like Timeouts. Their record timestamp is the time
// of publishing (they have no detected_at_ms).
func (p *Publisher) Recovered(ctx context.Context, rs []timeouts.Recovery) error {
	if len(rs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b := p.getBatch()
	for _, r := range rs {
		b.appendKey(r.DeviceID)
		b.buf = appendRecovered(b.buf, r.DeviceID, r.DownSinceMs, r.SeenAtMs)
		b.endValue(0)
	}
	b.seal(p.now())
	if err := p.publish(ctx, b, TypeRecovered); err != nil {
		return err
	}
	if p.published != nil {
		p.published(0, "", len(rs))
	}
	return nil
}

// publish writes b.msgs until every one is acknowledged or ctx is done.
//
// b goes back to the pool only when the producer no longer references it:
// Send returns early on ctx cancellation while a request holding our
// keys and values may still be out, so on that path b is left to the GC.
func (p *Publisher) publish(ctx context.Context, b *batch, kind string) error {
	pending, deadlines := b.msgs, b.deadlines
	backoff := retry.Backoff{Min: backoffMin, Max: backoffMax}
	for attempt := 0; ; attempt++ {
		err := p.prod.Send(ctx, pending)
		ackedAt := p.now()
		if err == nil {
			p.acked(kind, deadlines, ackedAt)
			p.putBatch(b)
			return nil
		}
		var werrs kafka.WriteErrors
		partial := errors.As(err, &werrs) && len(werrs) == len(pending)
		if !partial && ctx.Err() != nil {
			return ctx.Err() // b may still be in flight: not reused
		}
		if errors.Is(err, errClosed) {
			return err // nothing was queued
		}
		failed := len(pending)
		if partial {
			// Keep the failed messages, in order; count the others.
			n := 0
			for i := range pending {
				if werrs[i] == nil {
					p.acked(kind, deadlines[i:i+1], ackedAt)
					continue
				}
				pending[n], deadlines[n] = pending[i], deadlines[i]
				n++
			}
			pending, deadlines = pending[:n], deadlines[:n]
			failed = n
			err = firstError(werrs)
		}
		reason := publishReason(err)
		if p.m != nil {
			p.m.PublishErrors.WithLabelValues(reason).Inc()
		}
		// Jittered, so that instances hitting the same broker failure do
		// not retry in lockstep.
		delay := retry.Jitter(backoff.Next())
		if operatorMustAct(reason) && p.refused(reason) {
			// Retrying keeps the events (they leave their shards only
			// once acknowledged), but only an operator can end this: say
			// so once per kind, at ERROR, beside the rate-limited WARNs.
			p.log.Error("publish refused by Kafka, retrying until it is fixed", "reason", reason, "kind", kind, "err", err)
		}
		if ok, suppressed := p.errLog.Allow(ackedAt); ok {
			p.log.Warn("publish failed, retrying", "kind", kind, "failed", failed, "attempt", attempt+1,
				"retry_in", delay, "suppressed_since_last", suppressed, "err", err)
		}
		if !retry.Sleep(ctx, delay) {
			p.putBatch(b) // Send returned normally: nothing in flight
			return ctx.Err()
		}
	}
}

func (p *Publisher) acked(kind string, deadlines []int64, at time.Time) {
	if p.m == nil || len(deadlines) == 0 {
		return
	}
	switch kind {
	case TypeRecovered:
		p.m.RecoveredPublished.Add(float64(len(deadlines)))
		return
	case TypeStorm:
		return
	}
	p.m.TimeoutsPublished.Add(float64(len(deadlines)))
	atMs := at.UnixMilli()
	for _, d := range deadlines {
		if d != noLateness {
			p.m.Lateness.Observe(float64(atMs-d) / 1e3)
		}
	}
}

// Close flushes pending messages and closes the writer. Calls to Timeouts
// or Recovered must have returned.
func (p *Publisher) Close() error {
	p.prod.Close()
	return nil
}

// publishReason names why a produce attempt failed, for
// flatline_publish_errors_total{reason}.
func publishReason(err error) string {
	var kerr kafka.Error
	switch {
	case errors.Is(err, kafka.MessageSizeTooLarge), errors.Is(err, kafka.RecordListTooLarge):
		return "too_large"
	case errors.Is(err, kafka.TopicAuthorizationFailed), errors.Is(err, kafka.ClusterAuthorizationFailed),
		errors.Is(err, kafka.SASLAuthenticationFailed), errors.Is(err, kafka.TransactionalIDAuthorizationFailed):
		return "authorization"
	case errors.Is(err, kafka.NotLeaderForPartition), errors.Is(err, kafka.LeaderNotAvailable):
		return "not_leader"
	case errors.Is(err, kafka.UnknownTopicOrPartition):
		return "unknown_topic"
	case errors.Is(err, kafka.RequestTimedOut), errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &kerr):
		return "other"
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return "network"
	}
	return "other"
}

// operatorMustAct: errors no retry fixes.
func operatorMustAct(reason string) bool { return reason == "too_large" || reason == "authorization" }

// refused reports whether reason is logged for the first time.
func (p *Publisher) refused(reason string) bool {
	_, seen := p.refusedOnce.LoadOrStore(reason, true)
	return !seen
}

func firstError(errs kafka.WriteErrors) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
