package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/retry"
)

const (
	// fetchMaxWait is how long the broker may hold a fetch that finds no
	// new record.
	fetchMaxWait = 250 * time.Millisecond
	// fetchMaxBytes bounds a partition's share of one fetch response:
	// ~6,000 heartbeats, a quarter of a second of a partition beating
	// 25,000 times a second, so that the batcher, holding mergeHold
	// records, has the next records of most partitions to merge (1 MiB:
	// Redis 0.79–0.88 against 0.80–1.11 µs per reset; README, "Where the
	// time goes").
	fetchMaxBytes = 512 << 10
	// fetchMaxAnswer bounds one fetch response, all of a broker's
	// partitions together: 128 partitions' fetchMaxBytes, so that a broker
	// leading up to 128 of this instance's partitions fills each one's
	// share as a fetch per partition would. The heap a generation's answers
	// hold is then what it was with a fetch per partition: each
	// partition's share, at most fetchMaxBytes (or its first batch, when
	// larger).
	fetchMaxAnswer = 128 * fetchMaxBytes
	// fetchGrace is how long past fetchMaxWait a fetch's answer may take to
	// arrive before the connection is dropped and reopened at the next
	// offset.
	fetchGrace = time.Second
	// maxFetchGrace bounds the grace a broker reader grows for a broker
	// slower than fetchGrace (see brokerReader.grace).
	maxFetchGrace = 30 * time.Second
	// chunkMax is the most records handed to the batcher at once.
	chunkMax = 1024
)

// chunk is a run of consecutive records of one partition. Its records and
// their keys and values are its own, copied out of the fetch answer into a
// pooled slab, which the batcher puts back once the batch that takes the
// chunk is prepared: nothing holds a record past that (device ids are
// strings of their own; dead letters copy their key and value).
type chunk struct {
	partition int
	msgs      []kfetch.Record
	slab      *slab // nil for a chunk without records
	// next is the offset after the chunk: past its records and, for a
	// fetch's last chunk, past what the fetch skipped (transaction markers,
	// records of aborted transactions, offsets compaction removed), so the
	// written offset reaches the end of a partition that ends with those.
	next int64
	// sentMs is the injected clock when the fetch was sent: a producer's
	// clock is believed only up to it for the watermark (docs/operations.md, "Time").
	sentMs int64
	// reset is set on the record-less chunk that moves the partition to
	// next after its offset was out of range (see brokerReader.reset).
	reset uint64
	// answered is when the fetch's answer arrived, by the wall clock
	// (flatline_ingest_queue_seconds).
	answered time.Time
}

// partitionFetch is one partition's read state. It belongs to one
// goroutine at a time — the broker reader of the partition's leader, or the
// router (leaders.go) while it finds that leader — and moves between them
// over channels, its state with it.
type partitionFetch struct {
	partition int
	pos       *position
	// next is the offset of the next record to hand on.
	next int64
	// res is the partition's share of the last fetch, reused: its buffers
	// stop growing at the partition's largest share.
	res kfetch.Result
	// resets counts the out-of-range resets of this partition.
	resets uint64
	// backoff spaces the re-routings that follow a partition error (its
	// leader moved, or it does not decode); outage logs such a run once,
	// and its end.
	backoff retry.Backoff
	outage  retry.Outage
	// retryAt is when the router may route it again.
	retryAt time.Time
}

func (in *Ingest) newPartitionFetch(partition int, start int64, pos *position) *partitionFetch {
	return &partitionFetch{
		partition: partition, pos: pos, next: start,
		backoff: retry.Backoff{Min: 10 * time.Millisecond, Max: time.Second},
		outage:  retry.Outage{Log: in.opts.Log, Down: "fetch failing, retrying with backoff", Up: "fetch resumed"},
	}
}

// brokerReader reads, read_committed, the partitions of the signals topic
// one broker leads for this instance, and feeds the batcher. It sends one
// fetch for all of them at a time on its own connection (kfetch.Conn:
// control records and aborted transactions are dropped there), as the Java
// consumer and franz-go do: fuller answers, fewer of them, than a fetch
// per partition. Each answer's records go on a chunk at a time, a chunk
// holding one partition's: one hand-off and one socket deadline per fetch,
// not per record as with kafka-go's Reader.
//
// A partition the broker no longer leads, or whose share of an answer
// fails, goes back to the router after its backoff, which finds its leader
// and hands it to that broker's reader; the others read on.
type brokerReader struct {
	in     *Ingest
	dialer *kafka.Dialer
	addr   string
	out    chan<- chunk
	guard  *stallGuard
	// inbox brings the partitions the router routes here; displaced takes
	// back those that failed. Each has room for every partition of the
	// generation, so neither side ever waits on the other.
	inbox     chan *partitionFetch
	displaced chan<- *partitionFetch

	// parts are the reader's partitions, in the order of the last fetch,
	// and req that fetch's request: the order turns by one each fetch, so
	// that when answers reach their byte limit every partition comes first
	// in its turn.
	parts []*partitionFetch
	req   []kfetch.Part
	// ahead is set while the next fetch, next, is sent and its answer not
	// received (see fetch); sentMs is when the fetch whose answer comes
	// next was sent, nextSentMs when next was.
	ahead              bool
	next               []kfetch.Part
	sentMs, nextSentMs int64
	moved              []*partitionFetch // scratch: the last fetch's partitions handed back
	// grace stands for fetchGrace in this reader's fetch deadlines. A
	// broker that takes longer than fetchGrace to answer would fail every
	// fetch the same way, for ever: so a fetch ended by its deadline
	// doubles grace (up to maxFetchGrace) for the next, and a fetch that
	// fetchGrace would have allowed brings it back.
	grace time.Duration
	// backoff spaces the connections that follow a failed fetch; outage
	// logs such a run of failures once, and its end.
	backoff retry.Backoff
	outage  retry.Outage
}

// run reads until ctx ends. After a fetch error — a fetch lost on the way
// included: its deadline (fetchMaxWait + grace) ends it — it closes the
// connection and, after a doubling backoff (10 ms to 1 s), hands its
// partitions back to the router, which asks the brokers for their leaders
// afresh: a broker that went away leaves its partitions to the one that
// leads them now.
func (r *brokerReader) run(ctx context.Context) {
	for {
		if len(r.parts) == 0 {
			select {
			case p := <-r.inbox:
				r.parts = append(r.parts, p)
			case <-ctx.Done():
				return
			}
		}
		err := r.readConn(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			continue // every partition moved away
		}
		r.in.opts.Metrics.FetchErrors.Inc()
		r.outage.Failed(err, "broker", r.addr)
		if !retry.Sleep(ctx, r.backoff.Next()) {
			return
		}
		r.take()
		for _, p := range r.parts {
			r.displace(p, time.Time{})
		}
		clear(r.parts)
		r.parts = r.parts[:0]
	}
}

// take adds the partitions waiting in the inbox.
func (r *brokerReader) take() {
	for {
		select {
		case p := <-r.inbox:
			r.parts = append(r.parts, p)
		default:
			return
		}
	}
}

// displace hands p back to the router, to be routed again from retryAt.
func (r *brokerReader) displace(p *partitionFetch, retryAt time.Time) {
	p.retryAt = retryAt
	r.displaced <- p // never waits: room for every partition
}

// readConn opens a connection to the broker and fetches on it until a
// fetch fails (its error) or no partition is left here (nil).
func (r *brokerReader) readConn(ctx context.Context) error {
	cfg := kfetch.DefaultConfig()
	// The deadline of each fetch is its context's (see fetch); this only
	// bounds the ListOffsets an out-of-range answer asks for.
	cfg.MaxWait, cfg.MaxBytes, cfg.PartitionMaxBytes, cfg.Grace = fetchMaxWait, fetchMaxAnswer, fetchMaxBytes, maxFetchGrace
	conn, err := kfetch.Dial(ctx, r.dialer, r.addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	r.ahead = false
	for {
		if !r.ahead { // a fetch sent ahead carries the partitions it was sent for
			r.take()
			if len(r.parts) == 0 {
				return nil
			}
		}
		if err := r.fetch(ctx, conn); err != nil {
			return err
		}
	}
}

// fetch receives one answer for the reader's partitions on conn — to the
// fetch sent ahead, or to one it sends now — and hands their records on.
// When every partition's share came back whole it sends the next fetch
// before handing the records on, so that the broker builds the next answer
// while this one's records are copied and queued (a broker answers a
// connection's requests one after the other). It returns nil when conn
// may carry the next fetch.
func (r *brokerReader) fetch(ctx context.Context, conn *kfetch.Conn) error {
	a, err := r.receive(ctx, conn)
	if err != nil {
		return err
	}
	// Ahead only while the partitions stay as they are: none failed (it
	// goes back to the router, or resets), none waits to join.
	var sendErr error
	if a.whole && len(r.inbox) == 0 {
		sendErr = r.sendAhead(ctx, conn)
	}
	r.moved = r.moved[:0]
	for i, p := range r.parts {
		moved, err := r.handOn(ctx, p, r.req[i].Err, a)
		if err != nil {
			return err // ctx ended: the partitions end with the reader
		}
		if moved {
			r.moved = append(r.moved, p)
		}
	}
	if len(r.moved) > 0 {
		r.parts = slices.DeleteFunc(r.parts, func(p *partitionFetch) bool { return slices.Contains(r.moved, p) })
	}
	if sendErr != nil || !r.ahead {
		return sendErr
	}
	r.turn()
	r.req, r.next = r.next, r.req
	r.sentMs = r.nextSentMs
	for i, p := range r.parts {
		if r.req[i].Offset != p.next {
			// Never so while the partitions stay as they are: every share
			// is handed on up to its NextOffset.
			return fmt.Errorf("partition %d: fetch sent ahead at %d, handed on up to %d", p.partition, r.req[i].Offset, p.next)
		}
	}
	return nil
}

// receive receives the answer to the fetch sent ahead, or sends one now
// and receives its answer.
func (r *brokerReader) receive(ctx context.Context, conn *kfetch.Conn) (answer, error) {
	topic := r.in.opts.Kafka.SignalsTopic
	if !r.ahead {
		r.request()
		// The watermark the fetch may move is business time, on the
		// injected clock like every watermark and deadline; read before
		// the fetch goes out, it is never later than the send.
		r.sentMs = r.in.opts.Now().UnixMilli()
		if err := conn.SendMany(ctx, topic, r.req); err != nil {
			return answer{}, err
		}
	}
	r.ahead = false
	// The fetch's deadline, and how long the answer took, are the wall
	// clock's, from when the reader waits for it: the connection runs on it.
	waitFrom := time.Now()
	fctx, cancel := context.WithDeadline(ctx, waitFrom.Add(fetchMaxWait+r.grace))
	err := conn.ReceiveMany(fctx, topic, r.req)
	cancel()
	if ctx.Err() != nil {
		return answer{}, ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		r.grace = min(2*r.grace, maxFetchGrace)
		return answer{}, err
	}
	if time.Since(waitFrom)-fetchMaxWait <= fetchGrace {
		r.grace = fetchGrace
	}
	if err != nil {
		return answer{}, err
	}
	r.outage.Succeeded("broker", r.addr)
	r.backoff.Reset()
	a := answer{sentMs: r.sentMs, whole: true}
	for i, p := range r.parts {
		a.whole = a.whole && r.req[i].Err == nil
		if a.answered.IsZero() && r.req[i].Err == nil && r.req[i].Res.NextOffset > p.next {
			// A producer's clock is believed up to the moment the
			// records arrived: with the decoder's max_skew on top, no
			// heartbeat's time passes the fetch time + ingest.max_skew
			// (docs/operations.md, "Time").
			a.arrived, a.answered = r.in.opts.Now(), time.Now()
			r.in.opts.Metrics.IngestFetch.Observe(a.answered.Sub(waitFrom).Seconds())
		}
	}
	return a, nil
}

// sendAhead sends the next fetch, each partition from where the answer just
// received leaves it, in the order the next request would have.
func (r *brokerReader) sendAhead(ctx context.Context, conn *kfetch.Conn) error {
	r.next = r.next[:0]
	n := len(r.parts)
	for k := range n {
		i := (k + 1) % n // turned by one, as request turns them
		p := r.parts[i]
		r.next = append(r.next, kfetch.Part{Partition: p.partition, Offset: max(p.next, r.req[i].Res.NextOffset), Res: &p.res})
	}
	r.nextSentMs = r.in.opts.Now().UnixMilli()
	if err := conn.SendMany(ctx, r.in.opts.Kafka.SignalsTopic, r.next); err != nil {
		return err
	}
	r.ahead = true
	return nil
}

// request lays the reader's partitions out for the next fetch, turned by
// one from the last.
func (r *brokerReader) request() {
	r.turn()
	r.req = r.req[:0]
	for _, p := range r.parts {
		r.req = append(r.req, kfetch.Part{Partition: p.partition, Offset: p.next, Res: &p.res})
	}
}

// turn turns the partitions' order by one.
func (r *brokerReader) turn() {
	if len(r.parts) > 1 {
		first := r.parts[0]
		copy(r.parts, r.parts[1:])
		r.parts[len(r.parts)-1] = first
	}
}

// answer is what every partition's share of one fetch answer has in
// common: when the fetch was sent (injected clock), when it brought
// records, when they arrived (injected clock) and were answered (wall
// clock), and whether every share came back without an error.
type answer struct {
	sentMs   int64
	arrived  time.Time
	answered time.Time
	whole    bool
}

// handOn takes p's share of an answer, ferr its error: its records go to
// the batcher, an out-of-range offset resets it, and any other error hands
// it back to the router after its backoff (moved). The error returned is
// ctx's, when it ended during a hand-off.
func (r *brokerReader) handOn(ctx context.Context, p *partitionFetch, ferr error, a answer) (moved bool, err error) {
	if errors.Is(ferr, kafka.OffsetOutOfRange) && r.resetTo(p) >= 0 {
		return false, r.reset(ctx, p, a.sentMs)
	}
	if ferr != nil { // out of range with its bounds unknown included
		r.in.opts.Metrics.FetchErrors.Inc()
		p.outage.Failed(ferr, "partition", p.partition, "broker", r.addr)
		r.displace(p, time.Now().Add(p.backoff.Next()))
		return true, nil
	}
	p.outage.Succeeded("partition", p.partition)
	p.backoff.Reset()
	res := &p.res
	// Every record appended before this fetch was sent lies below the
	// high-water mark it returned: once that is written, the partition's
	// watermark may move to the send time, as with a probe. The mark is the
	// high-water mark, not the last stable offset: the plain records behind
	// an open transaction were appended too, and cannot be read until it
	// ends, so an open transaction holds the watermark back.
	if hwm := res.HighWatermark; hwm > p.next {
		p.pos.addMark(mark{sentMs: a.sentMs, offset: hwm})
	}
	if res.NextOffset <= p.next {
		return false, nil // nothing new
	}
	recs := res.Records
	if r.guard != nil {
		r.guard.observe(p.partition, recs, a.arrived.UnixMilli())
	}
	for len(recs) > 0 || p.next < res.NextOffset {
		n := min(len(recs), chunkMax)
		sl := copyRecords(recs[:n], a.arrived, r.in.headers)
		c := chunk{partition: p.partition, msgs: sl.recs, slab: sl, next: res.NextOffset, sentMs: a.sentMs, answered: a.answered}
		recs = recs[n:]
		if len(recs) > 0 {
			c.next = recs[0].Offset
		}
		select {
		case r.out <- c:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		p.next = c.next
	}
	return false, nil
}

// slab holds one chunk's records and their keys and values. Slabs are
// pooled, so a backlog's chunks stop allocating (and the collector stops
// scanning them) once the pool holds a few.
type slab struct {
	recs []kfetch.Record
	buf  []byte
	// refs counts the chunks reading the slab: a chunk split at a batch's
	// end shares it with its tail (see share).
	refs atomic.Int32
}

var slabs = sync.Pool{New: func() any { return new(slab) }}

// share counts one more chunk reading s.
func (s *slab) share() {
	if s != nil {
		s.refs.Add(1)
	}
}

// release is called by each chunk reading s once it is done with it; the
// last one puts s back in the pool.
func (s *slab) release() {
	if s != nil && s.refs.Add(-1) == 0 {
		s.recs, s.buf = s.recs[:0], s.buf[:0]
		slabs.Put(s)
	}
}

// copyRecords copies recs, whose keys and values alias the reader's Result,
// into a pooled slab, and caps their times at arrived. Headers are copied
// only when the decoder reads them (some ingest.from expression is
// header:<name>).
func copyRecords(recs []kfetch.Record, arrived time.Time, headers bool) *slab {
	sl := slabs.Get().(*slab)
	sl.refs.Store(1)
	size := 0
	for k := range recs {
		size += len(recs[k].Key) + len(recs[k].Value)
		if headers {
			size += len(recs[k].Headers)
		}
	}
	sl.recs = slices.Grow(sl.recs[:0], len(recs))[:len(recs)]
	buf := slices.Grow(sl.buf[:0], size)
	keep := func(b []byte) []byte {
		if b == nil {
			return nil // null stays null: a tombstone
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	for k := range recs {
		rec := &recs[k]
		sl.recs[k] = kfetch.Record{Offset: rec.Offset, Time: rec.Time, Key: keep(rec.Key), Value: keep(rec.Value), LogAppendTime: rec.LogAppendTime}
		if headers {
			sl.recs[k].Headers = keep(rec.Headers)
		}
		if sl.recs[k].Time.After(arrived) {
			sl.recs[k].Time = arrived
		}
	}
	sl.buf = buf
	return sl
}

// reset moves p to where kafka.start_offset points after the broker
// answered that p.next is out of range: below the log start (retention
// deleted it) or past the log end (the topic was recreated, an unclean
// leader election truncated it). The partition is never left unread; until
// the move is written the prober leaves its watermark alone
// (position.beginReset), since the written offset is not where the
// partition is read.
func (r *brokerReader) reset(ctx context.Context, p *partitionFetch, sentMs int64) error {
	res := &p.res
	to := r.resetTo(p)
	r.in.opts.Log.Warn("offset out of range; resetting by kafka.start_offset",
		"partition", p.partition, "offset", p.next, "reset_to", to, "start_offset", r.in.opts.Kafka.StartOffset,
		"log_start", res.LogStartOffset, "last_stable", res.LastStableOffset)
	p.resets++
	p.pos.beginReset(p.resets)
	select {
	case r.out <- chunk{partition: p.partition, next: to, sentMs: sentMs, reset: p.resets}:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.next = to
	return nil
}

// resetTo is where kafka.start_offset moves p after an out-of-range
// answer; -1 when the answer left that bound unknown.
func (r *brokerReader) resetTo(p *partitionFetch) int64 {
	if r.in.opts.Kafka.StartOffset == kafkaconn.StartLatest {
		return p.res.LastStableOffset
	}
	return p.res.LogStartOffset
}
