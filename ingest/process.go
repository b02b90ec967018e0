package ingest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
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
	hb      Heartbeat
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
	// settleAfter, when the batch is written side by side with the one
	// before it, is closed once that one is done: recoveries and replays
	// are settled in batch order.
	settleAfter <-chan struct{}
	co          *coalescer // nil unless ingest.coalesce_window > 0; shared likewise
	// job is the batch the processor decodes on a goroutine of its own
	// (see decodeAsync), and decoded says when it is done.
	job     batch
	decoded chan struct{}
}

// entry is the newest state of one device within a batch.
type entry struct {
	id       string
	tomb     bool
	score    float64
	override int64
	atMs     int64
	beats    int // the batch's records of the device this entry stands for
	// reregister: a heartbeat after a tombstone of the same batch; the
	// device's old state goes before the new deadline is written.
	reregister bool
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
	ps := make([]*processor, n)
	for k := range ps {
		ps[k] = &processor{in: in, latest: make(map[string]int), offsets: make(map[int]int64), wms: make(map[int]int64), resets: make(map[int]uint64), co: co, limiter: limiter, outage: outage,
			decoded: make(chan struct{}, 1)}
	}
	return ps
}

// written returns the next offset per partition and the watermark candidates
// (newest record time per partition) of the last processed batch.
func (p *processor) written() (map[int]int64, map[int]int64) { return p.offsets, p.wms }

func (p *processor) reset() {
	clear(p.latest)
	clear(p.entries)
	p.entries = p.entries[:0]
	clear(p.dead)
	p.dead = p.dead[:0]
	clear(p.offsets)
	clear(p.wms)
	clear(p.resets)
}

// prepare decodes the chunks' records in the order the batcher chose
// (order names each record's chunk; see batch), keeps the newest state per
// device and collects the invalid ones, ready for write: devices are written
// in the order they were read. The chunks may be reused once it returns.
func (p *processor) prepare(chunks []chunk, order []uint16) {
	p.decode(chunks, order)
	p.coalesce()
}

// decodeAsync decodes batch b (see decode) on a goroutine of its own, which
// then lets go of b's chunks and signals p.decoded. b is copied: the
// batcher reuses it at once.
func (p *processor) decodeAsync(b *batch) {
	p.job.chunks = append(p.job.chunks[:0], b.chunks...)
	p.job.order = append(p.job.order[:0], b.order...)
	go func() {
		p.decode(p.job.chunks, p.job.order)
		for _, c := range p.job.chunks {
			c.slab.release()
		}
		p.job.reuse()
		p.decoded <- struct{}{}
	}()
}

// decode is prepare's first part, which batches may run side by side: it
// decodes the chunks' records and keeps each device's newest state.
func (p *processor) decode(chunks []chunk, order []uint16) {
	p.reset()
	read := p.read[:0]
	for range chunks {
		read = append(read, 0)
	}
	p.read = read
	for _, k := range order {
		c := &chunks[k]
		msg := &c.msgs[read[k]]
		read[k]++
		// A producer's clock ahead of the fetch never raises the
		// watermark past the fetch's send (SPEC §7 "Time").
		if ts := min(msg.Time.UnixMilli(), c.sentMs); ts > p.wms[c.partition] {
			p.wms[c.partition] = ts
		}
		p.prepareOne(c.partition, msg)
	}
	for _, c := range chunks {
		// A partition's chunks come in offset order: the last one's next
		// is past everything the batch read of it, skipped offsets too.
		p.offsets[c.partition] = c.next
		if c.reset != 0 {
			p.resets[c.partition] = c.reset
		}
	}
	p.in.opts.Metrics.HeartbeatsConsumed.Add(float64(len(order)))
}

// coalesce is prepare's second part, run for the batches in their order:
// it drops the entries the coalescing memory says are written already.
func (p *processor) coalesce() {
	if p.co != nil {
		// Each device's newest state, checked against what is already
		// written: a covered one needs no write.
		var skipped int
		p.entries, skipped = p.co.filter(p.entries)
		if skipped > 0 {
			p.in.opts.Metrics.Coalesced.Add(float64(skipped))
		}
	}
}

// prepareOne decodes one record of partition into the batch.
func (p *processor) prepareOne(partition int, msg *kfetch.Record) {
	in := p.in
	m := in.opts.Metrics
	reason, ok := in.dec.Decode(msg.Key, msg.Value, msg.Time, &p.hb)
	if !ok {
		m.Invalid.WithLabelValues(string(reason)).Inc()
		p.deadLetter(partition, msg, reason)
		return
	}
	p.countFallbacks()
	hb := &p.hb
	if hb.Tombstone {
		m.Tombstones.Inc()
		p.put(entry{id: hb.DeviceID, tomb: true})
		return
	}
	classID := 0
	if hb.Class != "" {
		if c, ok := in.opts.Policy.ByName(hb.Class); ok {
			classID = c.ID
		}
	}
	var flags shard.Meta
	var override int64
	if hb.Override {
		flags |= shard.FlagOverride
		override = hb.Timeout.Milliseconds()
	}
	deadline := hb.AtMs + hb.Timeout.Milliseconds()
	if p.co != nil {
		// Padded by the window; prepare drops it if already covered.
		flags |= shard.FlagPadded
		deadline += p.co.window
	}
	p.put(entry{id: hb.DeviceID, score: shard.Score(deadline, shard.NewMeta(classID, flags)), override: override, atMs: hb.AtMs})
}

// ordered reports whether the batch must reach Redis after the batch before
// it and before the batch after it: its tombstones and override timeouts
// are not commutative (a ZADD GT is: the later deadline wins whichever
// write lands first).
func (p *processor) ordered() bool {
	for k := range p.entries {
		if e := &p.entries[k]; e.tomb || e.reregister || e.override > 0 {
			return true
		}
	}
	return false
}

// writeRedis writes the batch's deadlines, retrying until it is written or
// ctx ends. The recoveries it found wait in p.back for finish.
func (p *processor) writeRedis(ctx context.Context) error {
	in := p.in
	m := in.opts.Metrics
	// Route the whole batch by one layout, taken again at every attempt so a
	// batch retried across a layout change never writes by a stale one.
	writes := 0
	var back []shard.Recovered
	err := p.retryWrite(ctx, "redis", func() error {
		writes = p.route(in.opts.Layout.Current())
		got, err := in.opts.Store.WriteAfter(ctx, &p.batch, p.settleAfter)
		// An attempt that fails after it settled recoveries (the replicas
		// did not confirm it: redis.wait_replicas) took their down entries
		// away, so the next attempt does not find them again: they are
		// kept from the attempt that found them.
		back = appendRecovered(back, got)
		return err
	})
	p.back = back
	if err != nil {
		return err
	}
	if writes > 0 {
		m.RedisWrites.Add(float64(writes))
		m.RedisBatches.Inc()
	}
	return nil
}

// appendRecovered appends to back the recoveries of got whose device it
// does not hold yet: an attempt after a failover may find a recovery again
// that an earlier attempt settled on the master that went away.
func appendRecovered(back, got []shard.Recovered) []shard.Recovered {
	if len(back) == 0 || len(got) == 0 {
		return append(back, got...) // every attempt but a retried one
	}
	have := make(map[string]bool, len(back))
	for _, r := range back {
		have[r.ID] = true
	}
	for _, r := range got {
		if !have[r.ID] {
			back = append(back, r)
		}
	}
	return back
}

// finish does what follows a batch's write, in batch order: the coalescing
// memory, the dead-letter topic and the recovered events.
func (p *processor) finish(ctx context.Context) error {
	in := p.in
	m := in.opts.Metrics
	back := p.back
	p.back = nil
	if p.co != nil {
		for k := range p.entries {
			e := &p.entries[k]
			if e.tomb {
				p.co.undone(e.id)
				continue
			}
			if e.reregister {
				p.co.undone(e.id) // the old, maybe later, deadline is gone
			}
			d, meta := shard.DecodeScore(e.score)
			p.co.record(e.id, d, meta, e.override)
		}
	}
	if len(p.dead) > 0 && in.dlq != nil {
		if err := p.retryWrite(ctx, "dead-letter topic", func() error { return in.dlq.WriteMessages(ctx, p.dead...) }); err != nil {
			return err
		}
		m.DeadLettered.Add(float64(len(p.dead)))
	}
	if len(back) > 0 && in.opts.Recovery != nil {
		// Coalescing may have dropped entries: index them afresh.
		clear(p.latest)
		for k := range p.entries {
			p.latest[p.entries[k].id] = k
		}
		rs := make([]timeouts.Recovery, 0, len(back))
		for _, r := range back {
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
		if len(rs) > 0 {
			if err := in.opts.Recovery.Recovered(ctx, rs); err != nil {
				return err
			}
		}
	}
	return nil
}

// route fills p.batch from the batch's entries under layout l and returns
// the number of deadline writes.
func (p *processor) route(l shard.Layout) int {
	b := &p.batch
	b.Reset(l.Shards())
	writes := 0
	for k := range p.entries {
		e := &p.entries[k]
		h := shard.Hash(e.id)
		i := l.ShardOf(h)
		if e.tomb {
			b.Forget(i, e.id)
			if prev, moved := l.PreviousOf(h); moved {
				b.Forget(prev, e.id)
			}
			continue
		}
		prev, moved := l.PreviousOf(h)
		switch {
		case e.reregister:
			b.Reregister(i, e.id, e.score, e.override)
			if moved {
				b.Forget(prev, e.id)
			}
		case moved:
			b.AddMoved(i, prev, e.id, e.score, e.override)
		default:
			b.Add(i, e.id, e.score, e.override)
		}
		writes++
	}
	return writes
}

// put keeps the newest state of a device: a later tombstone deregisters, a
// later heartbeat re-registers, and among heartbeats the latest deadline wins.
func (p *processor) put(e entry) {
	e.beats = 1
	k, ok := p.latest[e.id]
	if !ok {
		p.latest[e.id] = len(p.entries)
		p.entries = append(p.entries, e)
		return
	}
	cur := &p.entries[k]
	e.beats += cur.beats
	switch {
	case e.tomb:
		*cur = e
	case cur.tomb:
		e.reregister = true
		*cur = e
	case e.score > cur.score:
		e.reregister = cur.reregister
		*cur = e
	default:
		cur.beats = e.beats
	}
}

func (p *processor) countFallbacks() {
	m := p.in.opts.Metrics
	if p.hb.SkewCorrected {
		m.Fallbacks.WithLabelValues("skew_corrected").Inc()
	}
	if p.hb.TimeoutOutOfRange {
		m.Fallbacks.WithLabelValues("timeout_out_of_range").Inc()
	}
	if p.hb.UnknownClass {
		m.Fallbacks.WithLabelValues("unknown_class").Inc()
	}
}

// deadLetter copies an invalid message for the dead-letter topic.
func (p *processor) deadLetter(partition int, msg *kfetch.Record, reason Reason) {
	in := p.in
	source := in.opts.Kafka.SignalsTopic + "/" + strconv.Itoa(partition) + "/" + strconv.FormatInt(msg.Offset, 10)
	if ok, suppressed := p.limiter.Allow(in.opts.Now()); ok {
		in.opts.Log.Warn("invalid heartbeat dead-lettered", "reason", string(reason), "source", source, "suppressed", suppressed)
	}
	if in.dlq == nil {
		return
	}
	// Cut to fit the topic (a key at most a quarter of the room): a dead
	// letter the broker refuses would hold the partition for good.
	key, val := msg.Key, msg.Value
	room := in.dlqRoom
	if room == 0 {
		room = kafkaconn.DefaultMaxMessageBytes - deadLetterOverhead
	}
	if len(key) > room/4 {
		key = key[:room/4]
	}
	if n := min(in.cfg.MaxValueBytes, room-len(key)); len(val) > n {
		val = val[:n]
	}
	p.dead = append(p.dead, kafka.Message{
		// Copied: the record's slab goes back to its pool once the batch
		// is prepared, before the dead letters are written.
		Key: bytes.Clone(key), Value: bytes.Clone(val),
		Headers: []protocol.Header{
			{Key: "flatline-reason", Value: []byte(reason)},
			{Key: "flatline-source", Value: []byte(source)},
		},
	})
}

// retryWrite runs the write fn until it succeeds or ctx ends, with backoff;
// the generation's outage logs the first failure and the success after it.
// Nothing is committed meanwhile, so the batch holds ingest back.
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
