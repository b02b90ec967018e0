package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/shard"
)

// entry is the newest state of one device within a batch.
type entry struct {
	id       string
	h        uint64 // shard.Hash(id), for routing and the parent memory
	check    uint64 // the coalescing memory's check of id (checkOf), when it coalesces
	tomb     bool
	score    float64
	override int64
	atMs     int64
	beats    int // the batch's records of the device this entry stands for
	// reregister: a heartbeat after a tombstone of the same batch; the
	// device's old state goes before the new deadline is written.
	reregister bool
	// hasParent: the batch's heartbeats of the device named its gateway,
	// the latest of them parent ("" for none).
	hasParent bool
	parent    string
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
func (p *processor) decodeAsync(ctx context.Context, b *batch) {
	p.job.chunks = append(p.job.chunks[:0], b.chunks...)
	p.job.order = append(p.job.order[:0], b.order...)
	p.answered = time.Time{}
	for _, c := range b.chunks {
		if len(c.msgs) > 0 && (p.answered.IsZero() || c.answered.Before(p.answered)) {
			p.answered = c.answered
		}
	}
	go func() {
		p.ctx = ctx
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
		// watermark past the fetch's send (docs/operations.md, "Time").
		if ts := min(msg.Time.UnixMilli(), c.sentMs); ts > p.wms[c.partition] {
			p.wms[c.partition] = ts
		}
		p.prepareOne(c.partition, msg)
		if p.abandoned {
			return
		}
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
	if p.pm != nil && (p.withParents || p.pm.active()) {
		// Before coalescing: a parent change is written even when the
		// deadline beside it is covered. A batch without parents still
		// sets its deregistrations aside while the memory holds any.
		p.kin = p.pm.changes(p.entries, p.kin[:0])
		p.pended = true
	}
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
	p.msg = decode.Message{Key: msg.Key, Value: msg.Value, Headers: msg.Headers, Time: msg.Time}
	reason, ok := in.dec.Decode(&p.msg, &p.hb)
	if reason == decode.Retry {
		if reason, ok = p.decodeAgain(); p.abandoned {
			return
		}
	}
	if !ok {
		m.Invalid.WithLabelValues(string(reason)).Inc()
		p.deadLetter(partition, msg, reason)
		return
	}
	hb := &p.hb
	if hb.Deviceless {
		m.Deviceless.Inc()
		return
	}
	p.countFallbacks()
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
	e := entry{id: hb.DeviceID, score: shard.Score(deadline, shard.NewMeta(classID, flags)), override: override, atMs: hb.AtMs}
	if hb.HasParent {
		if hb.SelfParent {
			in.fallbacks.self.Inc()
		}
		e.hasParent, e.parent = true, hb.Parent
		p.withParents = true
	}
	p.put(e)
}

// put keeps the newest state of a device: a later tombstone deregisters, a
// later heartbeat re-registers, and among heartbeats the latest deadline wins.
func (p *processor) put(e entry) {
	e.beats = 1
	k, ok := p.latest[e.id]
	if !ok {
		e.h = shard.Hash(e.id)
		if p.co != nil {
			e.check = checkOf(e.id)
		}
		p.latest[e.id] = len(p.entries)
		p.entries = append(p.entries, e)
		return
	}
	cur := &p.entries[k]
	e.h, e.check = cur.h, cur.check
	e.beats += cur.beats
	if !e.hasParent && !e.tomb && !cur.tomb {
		// The latest parent named stands, whichever deadline wins.
		e.hasParent, e.parent = cur.hasParent, cur.parent
	}
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
		cur.hasParent, cur.parent = e.hasParent, e.parent
	}
}

func (p *processor) countFallbacks() {
	f := &p.in.fallbacks
	if p.hb.SkewCorrected {
		f.skew.Inc()
	}
	if p.hb.TimeoutOutOfRange {
		f.timeout.Inc()
	}
	if p.hb.UnknownClass {
		f.class.Inc()
	}
}

// decodeAgain decodes the current record until it can be read (format
// avro's registry answers again), with backoff: an outage of the registry
// holds the batch, and so ingest, without skipping or dead-lettering
// anything. When the generation ends first the batch is abandoned: its
// processor is never handed to the writer (sequence), so nothing of it is
// written or committed.
func (p *processor) decodeAgain() (decode.Reason, bool) {
	b := retry.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	if p.ctx == nil {
		p.ctx = context.Background() // prepare, called without a generation
	}
	for {
		p.in.opts.Metrics.IngestErrors.Inc()
		err := p.in.SchemaRegistryHealthy()
		if err == nil {
			err = errors.New("schema registry unavailable")
		}
		p.outage.Failed(err, "target", "schema registry")
		if !retry.Sleep(p.ctx, b.Next()) {
			p.abandoned = true
			return "", false
		}
		if reason, ok := p.in.dec.Decode(&p.msg, &p.hb); reason != decode.Retry {
			p.outage.Succeeded("target", "schema registry")
			return reason, ok
		}
	}
}
