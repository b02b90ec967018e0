package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/timeouts"
	"github.com/flatline-dev/flatline/shard"
)

// LayoutSource gives the layout to route a batch by.
type LayoutSource interface {
	Current() shard.Layout
}

// RecoveryPublisher publishes recovered events, returning once Kafka
// acknowledged them.
type RecoveryPublisher interface {
	Recovered(ctx context.Context, rs []dispatch.Recovery) error
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
	Hooks          Hooks
}

// Ingest is the signals-topic consumer.
type Ingest struct {
	cfg  Config
	opts Options
	dec  *Decoder
	dlq  *kafka.Writer
}

// New builds an ingest.
func New(cfg Config, opts Options) (*Ingest, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := &Ingest{cfg: cfg, opts: opts}
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

// record is one fetched message with what the batcher needs.
type record struct {
	partition int
	msg       kafka.Message
}

// position tracks, per partition, the next offset not yet written to Redis.
type position struct {
	written atomic.Int64
	// fetchSince is when the partition's reader started waiting in its
	// current fetch (Unix ms; 0 while it is not fetching), and kick asks it
	// to reopen.
	fetchSince atomic.Int64
	fetchFrom  atomic.Int64 // the offset the reader waits for
	kick       chan struct{}

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

// stuckAfter is how long a reader may wait in one fetch while its partition
// has unread records before the prober makes it reopen: a fetch returns
// within its MaxWait (250 ms) when there is data, so this only catches a
// fetch lost on the way.
const stuckAfter = 10 * time.Second

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
	msgs := make(chan record, 4*in.cfg.BatchSize)
	dialer, _ := in.opts.Kafka.Dialer()
	for _, a := range assigned {
		p := &position{kick: make(chan struct{}, 1)}
		p.written.Store(starts[a.ID])
		pos[a.ID] = p
		partition, start := a.ID, starts[a.ID]
		gen.Start(func(gctx context.Context) { in.read(gctx, dialer, partition, start, msgs, p) })
	}
	commits := newCommitter()
	// Two batches in flight: the batcher prepares the next while the writer
	// has the previous one in Redis; writes, watermarks and commits stay in
	// order.
	free := make(chan *processor, 2)
	for _, p := range newProcessors(in, 2) {
		free <- p
	}
	prepared := make(chan *processor, 1)
	gen.Start(func(gctx context.Context) { in.batcher(gctx, msgs, free, prepared) })
	gen.Start(func(gctx context.Context) { in.writer(gctx, commits, pos, free, prepared) })
	gen.Start(func(gctx context.Context) { in.commitLoop(gctx, gen, commits) })
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
// fetch error it closes the reader and opens a new one at the next offset,
// after a doubling backoff (10 ms to 1 s): kafka-go's reader would otherwise
// restart its fetch loop at once after every error. The start and the end
// of a failure are logged once.
func (in *Ingest) read(ctx context.Context, dialer *kafka.Dialer, partition int, start int64, out chan<- record, pos *position) {
	next := start
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		// The prober kicks a reader that sits in a fetch while its partition
		// has unread records for too long (see stuckAfter): reopen it.
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-pos.kick:
				cancel()
			case <-rctx.Done():
			}
		}()
		err := in.readFrom(rctx, dialer, partition, &next, out, &backoff, pos)
		kicked := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if kicked {
			in.opts.Log.Warn("partition reader stuck in a fetch with records unread; reopened", "partition", partition, "after", stuckAfter)
			continue
		}
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

// readFrom reads from *next until an error, advancing *next.
func (in *Ingest) readFrom(ctx context.Context, dialer *kafka.Dialer, partition int, next *int64, out chan<- record, backoff *time.Duration, pos *position) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: in.opts.Kafka.Brokers, Topic: in.opts.Kafka.SignalsTopic, Partition: partition, Dialer: dialer,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 250 * time.Millisecond, QueueCapacity: 1024,
		ReadBackoffMin: 10 * time.Millisecond, ReadBackoffMax: 500 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(*next); err != nil {
		return err
	}
	for {
		pos.fetchFrom.Store(*next)
		pos.fetchSince.Store(time.Now().UnixMilli())
		m, err := r.FetchMessage(ctx)
		pos.fetchSince.Store(0)
		if err != nil {
			return err
		}
		if *backoff != 0 {
			in.opts.Log.Info("fetch resumed", "partition", partition)
			*backoff = 0
		}
		*next = m.Offset + 1
		select {
		case out <- record{partition: partition, msg: m}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batcher gathers fetched records into batches, prepares each with a free
// processor and hands it to the writer, in order.
func (in *Ingest) batcher(ctx context.Context, msgs <-chan record, free chan *processor, prepared chan<- *processor) {
	buf := make([]record, 0, in.cfg.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		buf = buf[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-msgs:
			buf = append(buf, r)
		}
		timer.Reset(in.cfg.BatchWait)
	fill:
		for len(buf) < in.cfg.BatchSize {
			select {
			case r := <-msgs:
				buf = append(buf, r)
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
		// Drain what is already queued without waiting longer.
	more:
		for len(buf) < in.cfg.BatchSize {
			select {
			case r := <-msgs:
				buf = append(buf, r)
			default:
				break more
			}
		}
		var p *processor
		select {
		case p = <-free:
		case <-ctx.Done():
			return
		}
		p.prepare(buf)
		select {
		case prepared <- p:
		case <-ctx.Done():
			return
		}
	}
}

// writer writes prepared batches in order, then moves the written offsets,
// the watermarks and the commits on.
func (in *Ingest) writer(ctx context.Context, commits *committer, pos map[int]*position, free chan<- *processor, prepared <-chan *processor) {
	for {
		var p *processor
		select {
		case p = <-prepared:
		case <-ctx.Done():
			return
		}
		if err := p.write(ctx); err != nil {
			// The generation ended mid-batch: nothing is committed, the
			// partitions' next owner re-reads the batch.
			in.opts.Log.Debug("batch abandoned", "err", err)
			return
		}
		offsets, wms := p.written()
		for part, off := range offsets {
			pos[part].written.Store(off)
			if t := pos[part].reached(off); t > wms[part] {
				wms[part] = t
			}
		}
		// The watermark first: firing waits for it, not for the commit.
		if err := in.opts.Store.RaiseWatermarks(ctx, 0, wms); err != nil && ctx.Err() == nil {
			in.opts.Log.Warn("raise watermarks", "err", err)
		}
		commits.add(offsets)
		free <- p
	}
}

// committer hands written offsets to commitLoop, which commits the latest
// ones in the background so the batcher never waits for Kafka's answer.
type committer struct {
	mu      sync.Mutex
	pending map[int]int64
	wake    chan struct{}
}

func newCommitter() *committer {
	return &committer{pending: make(map[int]int64), wake: make(chan struct{}, 1)}
}

func (c *committer) add(offsets map[int]int64) {
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

func (c *committer) take() map[int]int64 {
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
func (in *Ingest) commitLoop(ctx context.Context, gen *kafka.Generation, c *committer) {
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

// commitEvery is the shortest time between two offset commits.
const commitEvery = 100 * time.Millisecond

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
					// A fetch waiting long although the partition holds
					// records past the offset it asked for is lost.
					if since := p.fetchSince.Load(); since != 0 && sent-since > stuckAfter.Milliseconds() && po.LastOffset > p.fetchFrom.Load() {
						p.fetchSince.Store(0)
						select {
						case p.kick <- struct{}{}:
						default:
						}
					}
				}
				if in.opts.Metrics != nil {
					in.opts.Metrics.ConsumerLag.WithLabelValues(strconv.Itoa(po.Partition)).Set(float64(lag))
				}
			}
			if err := in.opts.Store.RaiseWatermarks(ctx, partitions, wms); err != nil && ctx.Err() == nil {
				in.opts.Log.Debug("raise watermarks", "err", err)
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
