package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// LayoutSource gives the layout to route a batch by.
type LayoutSource interface {
	Current() shard.Layout
}

// RecoveryPublisher publishes recovered events, returning once Kafka
// acknowledged them.
type RecoveryPublisher interface {
	Recovered(ctx context.Context, rs []timeouts.Recovery) error
}

// Hooks let tests observe ingest deterministically.
type Hooks struct {
	// Committed runs after a batch's offsets were committed.
	Committed func(offsets map[int]int64)
}

// Options wire an Ingest.
type Options struct {
	Store    *shard.Store
	Layout   LayoutSource
	Policy   *timeouts.Policy
	Kafka    kafkaconn.Config
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Now      func() time.Time
	Recovery RecoveryPublisher // nil: recovered events disabled
	// RecoveryWindow bounds how long after its timeout a device's return
	// counts as a recovery (dispatch.recovery_window).
	RecoveryWindow time.Duration
	// Raised, if set, receives the watermarks (partition → Unix ms) each
	// time ingest has raised them in Redis: the scanners of the same
	// process take them at once instead of at their next poll. It must not
	// block and must not keep the map.
	Raised func(wms map[int]int64)
	Hooks  Hooks
}

// Ingest is the signals-topic consumer.
type Ingest struct {
	cfg  Config
	opts Options
	dec  *Decoder
	dlq  *kafka.Writer
	// writeRedis writes a prepared batch: (*processor).writeRedis, or a
	// test's stand-in.
	writeRedis func(*processor, context.Context) error
}

// New builds an ingest.
func New(cfg Config, opts Options) (*Ingest, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := &Ingest{cfg: cfg, opts: opts, writeRedis: (*processor).writeRedis}
	in.dec = NewDecoder(DecoderConfig{Format: cfg.Format, MaxSkew: cfg.MaxSkew, MaxValueBytes: cfg.MaxValueBytes, Timeouts: opts.Policy.Config()})
	if opts.Kafka.DeadLetterTopic != "" {
		tr, err := opts.Kafka.Transport()
		if err != nil {
			return nil, err
		}
		in.dlq = &kafka.Writer{
			Addr: kafka.TCP(opts.Kafka.Brokers...), Topic: opts.Kafka.DeadLetterTopic, Transport: tr,
			Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, BatchSize: 10000, AllowAutoTopicCreation: true,
		}
	}
	return in, nil
}

// Run consumes until ctx is cancelled, joining generation after
// generation of the consumer group.
func (in *Ingest) Run(ctx context.Context) error {
	dialer, err := in.opts.Kafka.Dialer()
	if err != nil {
		return err
	}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: in.opts.Kafka.GroupID, Brokers: in.opts.Kafka.Brokers, Dialer: dialer,
		Topics:                []string{in.opts.Kafka.SignalsTopic},
		SessionTimeout:        in.opts.Kafka.SessionTimeout,
		HeartbeatInterval:     in.opts.Kafka.SessionTimeout / 6,
		RebalanceTimeout:      in.opts.Kafka.SessionTimeout,
		JoinGroupBackoff:      500 * time.Millisecond,
		WatchPartitionChanges: true, PartitionWatchInterval: 5 * time.Second,
		StartOffset: kafka.FirstOffset,
		Logger:      kafka.LoggerFunc(func(string, ...any) {}),
	})
	if err != nil {
		return fmt.Errorf("join consumer group %q: %w", in.opts.Kafka.GroupID, err)
	}
	defer group.Close()
	failing := false
	for {
		gen, err := group.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !failing {
				in.opts.Log.Warn("consumer group unavailable, retrying", "err", err)
			}
			failing = true
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		failing = false
		in.runGeneration(ctx, gen)
	}
}

// position tracks, per partition, the next offset not yet written to Redis.
type position struct {
	written atomic.Int64

	// marks are high-water-mark probes that found the partition not yet
	// fully written: once the written offset reaches a mark's offset, every
	// record appended before the probe was sent is in Redis, so the
	// partition's watermark can move to the probe's send time.
	mu    sync.Mutex
	marks []mark
}

type mark struct {
	sentMs, offset int64
}

// maxMarks bounds the pending probes per partition (the newest are kept).
const maxMarks = 256

func (p *position) addMark(m mark) {
	p.mu.Lock()
	if len(p.marks) == maxMarks {
		p.marks = append(p.marks[:0], p.marks[1:]...)
	}
	p.marks = append(p.marks, m)
	p.mu.Unlock()
}

// reached drops the marks the written offset has reached and returns the
// latest send time among them (0 if none).
func (p *position) reached(written int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var t int64
	k := 0
	for k < len(p.marks) && p.marks[k].offset <= written {
		t = p.marks[k].sentMs
		k++
	}
	p.marks = append(p.marks[:0], p.marks[k:]...)
	return t
}

func (in *Ingest) runGeneration(ctx context.Context, gen *kafka.Generation) {
	topic := in.opts.Kafka.SignalsTopic
	assigned := gen.Assignments[topic]
	parts := make([]int, len(assigned))
	for k, a := range assigned {
		parts[k] = a.ID
	}
	in.opts.Log.Info("partitions assigned", "generation", gen.ID, "partitions", parts)
	client, err := in.client()
	if err != nil {
		in.opts.Log.Error("kafka client", "err", err)
		return
	}
	if len(assigned) == 0 {
		// Nothing to read; keep the generation until it ends.
		gen.Start(func(gctx context.Context) { <-gctx.Done() })
		return
	}
	pos := make(map[int]*position, len(assigned))
	starts, err := in.resolveStarts(ctx, client, assigned)
	if err != nil {
		in.opts.Log.Warn("cannot resolve start offsets", "err", err)
		return
	}
	msgs := make(chan chunk, 64)
	dialer, _ := in.opts.Kafka.Dialer()
	for _, a := range assigned {
		p := &position{}
		p.written.Store(starts[a.ID])
		pos[a.ID] = p
		partition, start := a.ID, starts[a.ID]
		gen.Start(func(gctx context.Context) { in.read(gctx, dialer, partition, start, msgs, p) })
	}
	commits, raises := newLatest(), newLatest()
	// Three batches in flight: the batcher prepares the next while the
	// writer has two in Redis; watermarks and commits stay in order.
	free := make(chan *processor, writesInFlight+1)
	for _, p := range newProcessors(in, writesInFlight+1) {
		free <- p
	}
	prepared := make(chan *processor, 1)
	gen.Start(func(gctx context.Context) { in.batcher(gctx, msgs, free, prepared) })
	gen.Start(func(gctx context.Context) { in.writer(gctx, commits, raises, pos, free, prepared) })
	gen.Start(func(gctx context.Context) { in.commitLoop(gctx, gen, commits) })
	gen.Start(func(gctx context.Context) { in.raiseLoop(gctx, raises) })
	gen.Start(func(gctx context.Context) { in.probe(gctx, client, pos) })
}

func (in *Ingest) client() (*kafka.Client, error) {
	tr, err := in.opts.Kafka.Transport()
	if err != nil {
		return nil, err
	}
	return &kafka.Client{Addr: kafka.TCP(in.opts.Kafka.Brokers...), Transport: tr, Timeout: 10 * time.Second}, nil
}

// resolveStarts turns the committed offsets (or "none") into concrete ones.
func (in *Ingest) resolveStarts(ctx context.Context, client *kafka.Client, assigned []kafka.PartitionAssignment) (map[int]int64, error) {
	out := make(map[int]int64, len(assigned))
	var reqs []kafka.OffsetRequest
	for _, a := range assigned {
		out[a.ID] = a.Offset
		if a.Offset < 0 {
			reqs = append(reqs, kafka.FirstOffsetOf(a.ID))
		}
	}
	if len(reqs) == 0 {
		return out, nil
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{in.opts.Kafka.SignalsTopic: reqs}})
	if err != nil {
		return nil, err
	}
	for _, po := range resp.Topics[in.opts.Kafka.SignalsTopic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = po.FirstOffset
	}
	return out, nil
}

// read fetches one partition from start and feeds the batcher. After a
// fetch error — a fetch lost on the way included: its socket deadline
// (fetchMaxWait + fetchGrace) ends it — it closes the connection and opens
// a new one at the next offset, after a doubling backoff (10 ms to 1 s).
// The start and the end of a failure are logged once.
func (in *Ingest) read(ctx context.Context, dialer *kafka.Dialer, partition int, start int64, out chan<- chunk, pos *position) {
	next := start
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := in.readFrom(ctx, dialer, partition, &next, out, &backoff, pos)
		if ctx.Err() != nil {
			return
		}
		in.opts.Metrics.FetchErrors.Inc()
		if backoff == 0 {
			in.opts.Log.Warn("fetch failing, retrying with backoff", "partition", partition, "err", err)
			backoff = 10 * time.Millisecond
		} else if backoff < time.Second {
			backoff *= 2
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

const (
	// fetchMaxWait is how long the broker may hold a fetch that finds no
	// new record.
	fetchMaxWait = 250 * time.Millisecond
	// fetchMaxBytes bounds one fetch response.
	fetchMaxBytes = 4 << 20
	// fetchGrace is how long past fetchMaxWait a fetch's answer may take to
	// begin, and how long the records of an answer may pause, before the
	// connection is dropped and reopened at the next offset.
	fetchGrace = time.Second
	// chunkMax is the most records handed to the batcher at once.
	chunkMax = 1024
)

// chunk is a run of consecutive records of one partition.
type chunk struct {
	partition int
	msgs      []kafka.Message
}

// readFrom reads from *next until an error, advancing *next. It fetches
// whole responses on its own connection to the partition's leader and hands
// them to the batcher a chunk at a time: one hand-off and one socket
// deadline per fetch, not per record as with kafka-go's Reader.
func (in *Ingest) readFrom(ctx context.Context, dialer *kafka.Dialer, partition int, next *int64, out chan<- chunk, backoff *time.Duration, pos *position) error {
	topic := in.opts.Kafka.SignalsTopic
	var conn *kafka.Conn
	var err error
	for _, broker := range in.opts.Kafka.Brokers {
		if conn, err = dialer.DialLeader(ctx, "tcp", broker, topic, partition); err == nil {
			break
		}
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	// Cancelling ctx unblocks a fetch in progress.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := in.seek(conn, partition, next); err != nil {
		return err
	}
	sizeHint := 16
	for {
		sent, sentAt := in.opts.Now().UnixMilli(), time.Now()
		if err := conn.SetReadDeadline(sentAt.Add(fetchMaxWait + fetchGrace)); err != nil {
			return err
		}
		b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: fetchMaxBytes, MaxWait: fetchMaxWait})
		// Every record appended before this fetch was sent lies below the
		// high-water mark it returned: once that is written, the
		// partition's watermark may move to the send time, as with a probe.
		if hwm := b.HighWaterMark(); b.Err() == nil && hwm > *next {
			pos.addMark(mark{sentMs: sent, offset: hwm})
		}
		// The records stream from the socket as they are read: hand them
		// on a chunk at a time, so a slow batcher holds the fetch back
		// instead of a whole response piling up in memory.
		_ = conn.SetReadDeadline(time.Now().Add(fetchGrace))
		var msgs []kafka.Message
		err, read := error(nil), 0
		for err == nil {
			var m kafka.Message
			if m, err = b.ReadMessage(); err == nil {
				read++
				if msgs == nil {
					// Sized by the last chunk: a quiet partition's
					// fetches bring a few records, a busy one's many.
					msgs = make([]kafka.Message, 0, sizeHint)
				}
				msgs = append(msgs, m)
			}
			if len(msgs) == chunkMax || (err != nil && len(msgs) > 0) {
				if *backoff != 0 {
					in.opts.Log.Info("fetch resumed", "partition", partition)
					*backoff = 0
				}
				*next = msgs[len(msgs)-1].Offset + 1
				sizeHint = min(max(len(msgs), 16), chunkMax)
				select {
				case out <- chunk{partition: partition, msgs: msgs}:
				case <-ctx.Done():
					_ = b.Close()
					return ctx.Err()
				}
				msgs = nil
				_ = conn.SetReadDeadline(time.Now().Add(fetchGrace))
			}
		}
		*next = max(*next, b.Offset()) // past compacted-away offsets too
		if err := b.Close(); err != nil {
			switch {
			case errors.Is(err, kafka.OffsetOutOfRange):
				if err := in.seek(conn, partition, next); err != nil {
					return err
				}
			case errors.Is(err, kafka.RequestTimedOut) && (read > 0 || time.Since(sentAt) >= fetchMaxWait/2):
				// kafka-go's word for two fetches that went well: an
				// empty answer (nothing new within fetchMaxWait: every
				// quiet partition, every 250 ms) and an answer read to
				// its end after the deadline it was sent with (the
				// batcher held the records back). The answer was read
				// whole and kafka-go keeps the connection: fetch again.
				// Treated as a failure, it reopened the connection
				// after a backoff growing to 1 s, and records arriving
				// at a quiet partition — and with them the firing
				// watermark — waited for it. (An empty answer much
				// sooner than fetchMaxWait is a broker's own timeout
				// error: that one backs off.)
			default:
				return err
			}
		}
	}
}

// seek positions conn at *next. An offset the partition no longer holds
// (deleted by retention while flatline was away) moves to the first one it
// holds, logged; an offset past the end is an error (retried).
func (in *Ingest) seek(conn *kafka.Conn, partition int, next *int64) error {
	_, err := conn.Seek(*next, kafka.SeekAbsolute)
	if !errors.Is(err, kafka.OffsetOutOfRange) {
		return err
	}
	first, last, oerr := conn.ReadOffsets()
	if oerr != nil {
		return oerr
	}
	if *next >= first {
		return fmt.Errorf("offset %d of partition %d is out of range [%d, %d]: %w", *next, partition, first, last, err)
	}
	in.opts.Log.Warn("committed offset no longer in the partition (retention); skipping to its first offset",
		"partition", partition, "offset", *next, "first", first, "skipped", first-*next)
	*next = first
	_, err = conn.Seek(first, kafka.SeekAbsolute)
	return err
}

// batcher gathers fetched chunks into batches of at most batch_size
// records, prepares each with a free processor and hands it to the writer,
// in order.
func (in *Ingest) batcher(ctx context.Context, chunks <-chan chunk, free chan *processor, prepared chan<- *processor) {
	size := in.cfg.BatchSize
	var buf []chunk
	var carry []chunk // the rest of a chunk split at a batch's end
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		buf = append(buf[:0], carry...)
		carry = carry[:0]
		n := 0
		for _, c := range buf {
			n += len(c.msgs)
		}
		if n == 0 {
			select {
			case <-ctx.Done():
				return
			case c := <-chunks:
				buf = append(buf, c)
				n += len(c.msgs)
			}
		}
		if in.cfg.BatchWait > 0 {
			timer.Reset(in.cfg.BatchWait)
		fill:
			for n < size {
				select {
				case c := <-chunks:
					buf = append(buf, c)
					n += len(c.msgs)
				case <-timer.C:
					break fill
				case <-ctx.Done():
					return
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		// Take what is already queued without waiting longer.
	more:
		for n < size {
			select {
			case c := <-chunks:
				buf = append(buf, c)
				n += len(c.msgs)
			default:
				break more
			}
		}
		if n > size {
			// Split the last chunk: its tail starts the next batch.
			last := &buf[len(buf)-1]
			keep := len(last.msgs) - (n - size)
			carry = append(carry, chunk{partition: last.partition, msgs: last.msgs[keep:]})
			last.msgs = last.msgs[:keep:keep]
		}
		var p *processor
		select {
		case p = <-free:
		case <-ctx.Done():
			return
		}
		p.prepare(buf)
		clear(buf)
		select {
		case prepared <- p:
		case <-ctx.Done():
			return
		}
	}
}

// writer writes prepared batches in order, then moves the written offsets,
// the watermarks and the commits on.
func (in *Ingest) writer(ctx context.Context, commits, raises *latest, pos map[int]*position, free chan<- *processor, prepared <-chan *processor) {
	// Two batches in Redis at once: the next batch's commands go out while
	// Redis still works through the previous one's, so Redis does not sit
	// idle while a reply is read and the next request written. Only
	// batches whose writes commute overlap (see processor.ordered), and
	// what a batch's look at the down sets found is settled after the
	// batch before it is done (shard.Store.WriteAfter); what follows a
	// write — offsets, watermarks, commits, dead letters, recovered
	// events — stays in batch order.
	queue := make(chan *writing, writesInFlight-1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for w := range queue {
			<-w.done
			err := w.err
			if err == nil {
				err = w.p.finish(ctx)
			}
			if err != nil {
				// The generation ended mid-batch: nothing is committed,
				// the partitions' next owner re-reads the batch.
				in.opts.Log.Debug("batch abandoned", "err", err)
				return
			}
			p := w.p
			offsets, wms := p.written()
			for part, off := range offsets {
				pos[part].written.Store(off)
				if t := pos[part].reached(off); t > wms[part] {
					wms[part] = t
				}
			}
			// Watermark and commit follow in the background: the next
			// batch goes to Redis at once.
			raises.add(wms)
			commits.add(offsets)
			free <- p
		}
	}()
	var last *writing
	defer func() {
		close(queue)
		<-finished
		if last != nil {
			<-last.done // no write outlives the generation
		}
	}()
	for {
		var p *processor
		select {
		case p = <-prepared:
		case <-ctx.Done():
			return
		case <-finished:
			return
		}
		w := &writing{p: p, done: make(chan struct{}), ordered: p.ordered()}
		if last != nil && (w.ordered || last.ordered) {
			select {
			case <-last.done:
			case <-ctx.Done():
				return
			}
		}
		// Queued before it starts: a write starts once the one two back
		// is done, so at most writesInFlight are in Redis.
		select {
		case queue <- w:
		case <-ctx.Done():
			return
		case <-finished:
			return
		}
		p.settleAfter = nil
		if last != nil {
			p.settleAfter = last.done
		}
		go func() {
			defer close(w.done)
			w.err = in.writeRedis(p, ctx)
		}()
		last = w
	}
}

// writesInFlight is how many batches the writer has in Redis at once.
const writesInFlight = 2

// writing is a batch on its way to Redis.
type writing struct {
	p       *processor
	ordered bool
	done    chan struct{} // closed when the write ended; err says how
	err     error
}

// raiseLoop raises the watermarks of written batches in Redis, the newest
// per partition at a time, and hands them to the local scanners.
func (in *Ingest) raiseLoop(ctx context.Context, r *latest) {
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		wms := r.take()
		if wms == nil {
			continue
		}
		if err := in.opts.Store.RaiseWatermarks(ctx, 0, wms); err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				in.opts.Log.Warn("raise watermarks", "err", err)
			}
			failing = true
			r.add(wms) // kept for the next try
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		failing = false
		if in.opts.Raised != nil {
			in.opts.Raised(wms)
		}
	}
}

// latest gathers per-partition values that only move forward (written
// offsets for commitLoop, watermarks for raiseLoop) and hands the newest
// to a background loop, so the writer never waits for Kafka's or Redis's
// answer to them.
type latest struct {
	mu      sync.Mutex
	pending map[int]int64
	wake    chan struct{}
}

func newLatest() *latest {
	return &latest{pending: make(map[int]int64), wake: make(chan struct{}, 1)}
}

func (c *latest) add(offsets map[int]int64) {
	c.mu.Lock()
	for p, off := range offsets {
		if off > c.pending[p] {
			c.pending[p] = off
		}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *latest) take() map[int]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return nil
	}
	out := c.pending
	c.pending = make(map[int]int64, len(out))
	return out
}

// commitLoop commits what the batcher wrote until the generation ends, and
// once more then, so a clean shutdown leaves nothing to re-read.
func (in *Ingest) commitLoop(ctx context.Context, gen *kafka.Generation, c *latest) {
	failing := false
	commit := func() {
		offsets := c.take()
		if offsets == nil {
			return
		}
		if err := gen.CommitOffsets(map[string]map[int]int64{in.opts.Kafka.SignalsTopic: offsets}); err != nil {
			if !failing && ctx.Err() == nil {
				in.opts.Log.Warn("commit offsets failing (they are retried; messages are re-read at worst)", "err", err)
			}
			failing = true
			c.add(offsets) // retried with the next ones
			return
		}
		if failing {
			in.opts.Log.Info("commit offsets resumed")
			failing = false
		}
		if h := in.opts.Hooks.Committed; h != nil {
			h(offsets)
		}
	}
	// Commits are only where a restart resumes: at most one per
	// commitEvery keeps them off the broker's hot path.
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			commit()
			return
		case <-c.wake:
			if wait := commitEvery - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					commit()
					return
				case <-time.After(wait):
				}
			}
			last = time.Now()
			commit()
		}
	}
}

// commitEvery is the shortest time between two offset commits: at most 50
// a second per instance, a trifle for a broker, and the consumer group's
// lag shows 0 within 20 ms of the last write.
const commitEvery = 20 * time.Millisecond

// probe moves the watermark of every caught-up partition to the send time
// of a high-water-mark probe, and reports lag.
func (in *Ingest) probe(ctx context.Context, client *kafka.Client, pos map[int]*position) {
	topic := in.opts.Kafka.SignalsTopic
	partitions := 0
	reqs := make([]kafka.OffsetRequest, 0, len(pos))
	for p := range pos {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	t := time.NewTicker(in.cfg.ProbeInterval)
	defer t.Stop()
	wms := make(map[int]int64, len(pos))
	for {
		if partitions == 0 {
			md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
			if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil {
				partitions = len(md.Topics[0].Partitions)
			}
		}
		sent := in.opts.Now().UnixMilli()
		resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		if err == nil {
			clear(wms)
			for _, po := range resp.Topics[topic] {
				p := pos[po.Partition]
				if po.Error != nil || p == nil {
					continue
				}
				lag := po.LastOffset - p.written.Load()
				if lag <= 0 {
					wms[po.Partition] = sent
					lag = 0
				} else {
					p.addMark(mark{sentMs: sent, offset: po.LastOffset})
				}
				if in.opts.Metrics != nil {
					in.opts.Metrics.ConsumerLag.WithLabelValues(strconv.Itoa(po.Partition)).Set(float64(lag))
				}
			}
			if err := in.opts.Store.RaiseWatermarks(ctx, partitions, wms); err != nil {
				if ctx.Err() == nil {
					in.opts.Log.Debug("raise watermarks", "err", err)
				}
			} else if in.opts.Raised != nil {
				in.opts.Raised(wms)
			}
		} else if ctx.Err() == nil {
			in.opts.Log.Debug("probe high-water marks", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close releases the dead-letter writer.
func (in *Ingest) Close() error {
	if in.dlq != nil {
		return in.dlq.Close()
	}
	return nil
}
