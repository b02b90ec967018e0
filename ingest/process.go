package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// processor turns one batch of records into one Redis round trip: the
// batcher prepares it, then hands it to the writer, which hands it back once
// written (never both at once). It reuses its buffers across batches.
type processor struct {
	in      *Ingest
	hb      decode.Heartbeat
	msg     decode.Message // the record being decoded, kept here so it does not escape per record
	batch   shard.Batch
	latest  map[string]int
	entries []entry
	dead    []kafka.Message
	offsets map[int]int64
	wms     map[int]int64
	resets  map[int]uint64    // partition → the reset number a chunk of the batch carried
	read    []int             // per chunk of the batch being prepared: its records read
	limiter *logging.Limiter  // shared by a generation's processors
	outage  *retry.Outage     // shared likewise: an outage is logged once, not per processor
	back    []shard.Recovered // found by writeRedis, reported by finish
	// withParents says a heartbeat of the batch named a parent; kin are
	// the batch's parent changes (parentMemo.changes).
	withParents bool
	pended      bool // the parent memory set the batch's changes aside (see parentMemo)
	kin         []kinChange
	// settleAfter, when the batch is written side by side with the one
	// before it, is closed once that one is done: recoveries and replays
	// are settled in batch order.
	settleAfter <-chan struct{}
	co          *coalescer  // nil unless ingest.coalesce_window > 0; shared likewise
	pm          *parentMemo // shared likewise
	// job is the batch the processor decodes on a goroutine of its own
	// (see decodeAsync), and decoded says when it is done.
	job     batch
	decoded chan struct{}
	// ctx is the generation's, for decodeAgain; abandoned is set when it
	// ended while the batch waited for the schema registry.
	ctx       context.Context
	abandoned bool
	// answered is the earliest fetch answer among the batch's chunks with
	// records (zero if none).
	answered time.Time
}

// newProcessors returns the n processors of one consumer-group generation:
// they share its coalescing memory, its invalid-message log limiter and its
// outage state.
func newProcessors(in *Ingest, n int) []*processor {
	var co *coalescer
	if w := in.cfg.CoalesceWindow.Milliseconds(); w > 0 {
		co = newCoalescer(w, coalesceMaxEntries)
	}
	limiter := &logging.Limiter{Every: time.Second}
	outage := &retry.Outage{Log: in.opts.Log,
		Down: "ingest paused: write failed, retrying without committing",
		Up:   "ingest resumed"}
	pm := newParentMemo()
	ps := make([]*processor, n)
	for k := range ps {
		ps[k] = &processor{in: in, latest: make(map[string]int), offsets: make(map[int]int64), wms: make(map[int]int64), resets: make(map[int]uint64), co: co, pm: pm, limiter: limiter, outage: outage,
			decoded: make(chan struct{}, 1)}
	}
	return ps
}

// written returns the next offset per partition and the watermark candidates
// (newest record time per partition) of the last processed batch.
func (p *processor) written() (map[int]int64, map[int]int64) { return p.offsets, p.wms }

func (p *processor) reset() {
	p.abandoned = false
	p.withParents, p.pended = false, false
	clear(p.kin)
	p.kin = p.kin[:0]
	clear(p.latest)
	clear(p.entries)
	p.entries = p.entries[:0]
	clear(p.dead)
	p.dead = p.dead[:0]
	clear(p.offsets)
	clear(p.wms)
	clear(p.resets)
}

// finish does what follows a batch's write, in batch order: the coalescing
// memory, the dead-letter topic and the recovered events.
func (p *processor) finish(ctx context.Context) error {
	in := p.in
	back := p.back
	p.back = nil
	if p.co != nil {
		p.co.recordWritten(p.entries)
	}
	p.recordKin()
	if err := p.sendDeadLetters(ctx); err != nil {
		return err
	}
	if len(back) == 0 {
		return nil
	}
	// Coalescing may have dropped entries: index them afresh.
	clear(p.latest)
	for k := range p.entries {
		p.latest[p.entries[k].id] = k
	}
	if in.opts.Recovery != nil {
		if err := p.recovered(ctx, back); err != nil {
			return err
		}
	}
	return p.returnOrphans(ctx, back)
}

// recovered publishes the recovered events of the devices back from a
// timeout within dispatch.recovery_window.
func (p *processor) recovered(ctx context.Context, back []shard.Recovered) error {
	in := p.in
	rs := make([]timeouts.Recovery, 0, len(back))
	for _, r := range back {
		if r.Awaited {
			continue // a parent back from a silence, not from a timeout
		}
		down, meta := shard.DecodeScore(r.DownScore)
		if meta.Has(shard.FlagPadded) {
			down -= in.cfg.CoalesceWindow.Milliseconds()
		}
		e := p.entries[p.latest[r.ID]]
		if e.atMs-down > in.opts.RecoveryWindow.Milliseconds() {
			continue // back after the recovery window: tracked again, no event
		}
		rs = append(rs, timeouts.Recovery{DeviceID: r.ID, DownSinceMs: down, SeenAtMs: e.atMs})
	}
	if len(rs) == 0 {
		return nil
	}
	return in.opts.Recovery.Recovered(ctx, rs)
}

// retryRedis runs the Redis write fn until it succeeds or ctx ends, with
// backoff, each try under the instance's Redis link (redisLink.attempt),
// which logs the failures and gives each try its deadline. Nothing is
// committed meanwhile, so the batch holds ingest back.
func (p *processor) retryRedis(ctx context.Context, fn func(context.Context) error) error {
	err := retry.Do(ctx, retry.Backoff{Min: 20 * time.Millisecond, Max: time.Second}, func(error) {
		p.in.opts.Metrics.IngestErrors.Inc()
	}, func() error {
		return p.in.link.attempt(ctx, "deadlines", fn)
	})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// retryWrite runs the write fn (to Kafka: the dead-letter topic) until it
// succeeds or ctx ends, with backoff; the generation's outage logs the
// first failure and the success after it. Nothing is committed meanwhile,
// so the batch holds ingest back.
func (p *processor) retryWrite(ctx context.Context, what string, fn func() error) error {
	err := retry.Do(ctx, retry.Backoff{Min: 20 * time.Millisecond, Max: time.Second}, func(err error) {
		p.in.opts.Metrics.IngestErrors.Inc()
		p.outage.Failed(err, "target", what)
	}, fn)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	p.outage.Succeeded("target", what)
	return nil
}
