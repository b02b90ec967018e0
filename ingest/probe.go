package ingest

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/retry"
)

// probe moves the watermark of every caught-up partition to the send time
// of a high-water-mark probe, and reports lag.
//
// Every probe is followed by a look at the signals topic's partition count
// (partitionCounter): a watermark is raised only to a moment the count was
// confirmed for, and confirmed carries the latest such moment to the raise
// loop, which caps the watermarks of written batches at it. When partitions
// were added, the new count goes to Redis at once — the firing gate then
// waits for watermarks of the new partitions, which nobody reads yet — and
// the prober returns, which ends the generation: the group rebalances and
// the new partitions get readers within a few hundred milliseconds instead
// of at kafka-go's next partition watch.
func (in *Ingest) probe(ctx context.Context, client *kafka.Client, pos map[int]*position, confirmed *atomic.Int64, guard *stallGuard) {
	dialer, err := in.opts.Kafka.Dialer()
	if err != nil {
		in.opts.Log.Error("kafka dialer", "err", err)
		return
	}
	pr := in.newProber(client, dialer, pos, confirmed, guard)
	defer pr.close()
	t := time.NewTicker(in.cfg.ProbeInterval)
	defer t.Stop()
	for {
		sent := in.opts.Now().UnixMilli()
		wms, ok := pr.ask(ctx, sent)
		if !ok {
			return
		}
		pr.raise(ctx, sent, wms)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// prober is one generation's probe loop: what it asks and what it keeps
// from one probe to the next.
type prober struct {
	in        *Ingest
	client    *kafka.Client
	topic     string
	pos       map[int]*position
	confirmed *atomic.Int64
	guard     *stallGuard
	counter   *partitionCounter
	// unconfirmed logs an outage of the partition-count confirmation once.
	unconfirmed retry.Outage
	// partitions is the count this generation confirmed first: the topic
	// as the group's assignment saw it.
	partitions int
	// The high-water mark (read_uncommitted), not the last stable offset
	// the readers stop at: a plain record appended behind an open
	// transaction cannot be read until the transaction ends, and the
	// watermark must not pass it meanwhile.
	reqs      []kafka.OffsetRequest
	wms, hwms map[int]int64
	counted   chan partitionCount
}

func (in *Ingest) newProber(client *kafka.Client, dialer *kafka.Dialer, pos map[int]*position, confirmed *atomic.Int64, guard *stallGuard) *prober {
	topic := in.opts.Kafka.SignalsTopic
	pr := &prober{
		in: in, client: client, topic: topic, pos: pos, confirmed: confirmed, guard: guard,
		counter: &partitionCounter{dialer: dialer, brokers: in.opts.Kafka.Brokers, topic: topic},
		unconfirmed: retry.Outage{Log: in.opts.Log,
			Down: "cannot confirm the signals topic's partition count; watermarks held",
			Up:   "signals topic's partition count confirmed again"},
		reqs:    make([]kafka.OffsetRequest, 0, len(pos)),
		wms:     make(map[int]int64, len(pos)),
		hwms:    make(map[int]int64, len(pos)),
		counted: make(chan partitionCount, 1),
	}
	for p := range pos {
		pr.reqs = append(pr.reqs, kafka.LastOffsetOf(p))
	}
	return pr
}

// close ends the generation's probing. The partitions are this
// generation's: once it ends, another instance may own them, and a lag left
// behind here would be stale (and could keep FlatlineConsumerLagHigh
// firing). kafka-go starts the next generation only after this one's
// goroutines returned, so the next prober sets its own partitions' series
// afresh.
func (pr *prober) close() {
	pr.counter.close()
	if m := pr.in.opts.Metrics; m != nil {
		for p := range pr.pos {
			m.ConsumerLag.DeleteLabelValues(strconv.Itoa(p))
		}
	}
}

// ask sends one probe at sent and returns the watermarks it proves, or
// false when the prober is to stop (the context ended, or partitions were
// added: see probe).
func (pr *prober) ask(ctx context.Context, sent int64) (map[int]int64, bool) {
	in, wms := pr.in, pr.wms
	clear(wms)
	// The count is asked beside the high-water marks, not after them:
	// asked after sent, it confirms sent either way, and the watermarks
	// wait for one round trip to the brokers instead of two. It is asked
	// even when the probe fails: the watermarks of fetched batches move
	// only as far as it was confirmed.
	go func() {
		n, err := pr.counter.count(ctx)
		pr.counted <- partitionCount{n, err}
	}()
	resp, err := pr.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{pr.topic: pr.reqs}})
	if err == nil {
		in.probed(sent, resp.Topics[pr.topic], pr.pos, wms)
		if pr.guard != nil {
			gctx, cancel := in.link.bounded(ctx)
			pr.guard.probed(gctx, sent, in.opts.Now().UnixMilli(), highWaterMarks(resp.Topics[pr.topic], pr.hwms))
			cancel()
		}
	} else if ctx.Err() == nil {
		in.opts.Log.Debug("probe high-water marks", "err", err)
	}
	c := <-pr.counted
	switch {
	case ctx.Err() != nil:
		return nil, false
	case c.err != nil:
		pr.unconfirmed.Failed(c.err)
		clear(wms)
	case pr.partitions == 0 || c.n == pr.partitions:
		pr.partitions = c.n
		pr.unconfirmed.Succeeded()
		if sent > pr.confirmed.Load() {
			pr.confirmed.Store(sent)
		}
	default:
		in.partitionsChanged(ctx, pr.partitions, c.n)
		return nil, false
	}
	pr.guard.capAt(wms)
	return wms, true
}

// raise hands the probe's watermarks on: to this process's scanners first,
// as with written batches (see raiser) — what the probe found is true
// whether or not Redis has it yet — then to Redis; the storm guard's own
// round trips (re-reading the stalls, saving what it learned) come last:
// they are bookkeeping, and must not hold this probe's watermarks back.
func (pr *prober) raise(ctx context.Context, sent int64, wms map[int]int64) {
	in := pr.in
	if in.opts.Raised != nil {
		in.opts.Raised(wms)
	}
	if err := in.link.attempt(ctx, "watermarks", func(ctx context.Context) error {
		return in.opts.Store.RaiseWatermarks(ctx, pr.partitions, wms)
	}); err != nil {
		if ctx.Err() == nil {
			in.opts.Log.Debug("raise watermarks", "err", err)
		}
	}
	if pr.guard != nil {
		gctx, cancel := in.link.bounded(ctx)
		pr.guard.maintain(gctx, sent)
		cancel()
	}
}

// partitionCount is what partitionCounter.count answered.
type partitionCount struct {
	n   int
	err error
}

// partitionsChanged records a new partition count of the signals topic in
// Redis, so that firing waits for the new partitions' watermarks, before
// the prober ends the generation. Should the write fail, the raise loop's
// cap (no confirmation after this) and the next generation's first probe,
// which records the count it confirms, keep firing from passing the moment
// the partitions appeared.
func (in *Ingest) partitionsChanged(ctx context.Context, was, now int) {
	in.opts.Log.Info("the signals topic's partition count changed; rejoining the consumer group", "was", was, "now", now)
	if err := in.link.attempt(ctx, "watermarks", func(ctx context.Context) error {
		return in.opts.Store.RaiseWatermarks(ctx, now, nil)
	}); err != nil && ctx.Err() == nil {
		in.opts.Log.Warn("record the signals topic's partition count", "err", err)
	}
}

// probed takes a probe's high-water marks, sent at sent: a caught-up
// partition's watermark may move to sent (into wms), a partition behind
// gets a mark its written offset will reach, and the lag is reported.
func (in *Ingest) probed(sent int64, offsets []kafka.PartitionOffsets, pos map[int]*position, wms map[int]int64) {
	for _, po := range offsets {
		p := pos[po.Partition]
		if po.Error != nil || p == nil {
			continue
		}
		lag := po.LastOffset - p.written.Load()
		switch {
		case lag > 0:
			p.addMark(mark{sentMs: sent, offset: po.LastOffset})
		case lag == 0 && !p.moving():
			wms[po.Partition] = sent
		default:
			// Written past the partition's end: a committed offset the
			// partition does not hold (the topic recreated, the log
			// truncated), or the reader is moving off one. The partition
			// cannot be read from there, so it is not caught up, whatever
			// its written offset says.
			lag = 0
		}
		if in.opts.Metrics != nil {
			in.opts.Metrics.ConsumerLag.WithLabelValues(strconv.Itoa(po.Partition)).Set(float64(lag))
		}
	}
}

// highWaterMarks fills hwms with the high-water marks of a probe's answer.
func highWaterMarks(offsets []kafka.PartitionOffsets, hwms map[int]int64) map[int]int64 {
	clear(hwms)
	for _, po := range offsets {
		if po.Error == nil {
			hwms[po.Partition] = po.LastOffset
		}
	}
	return hwms
}
