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
	// fetchMaxBytes bounds one fetch response: ~6,000 heartbeats, a
	// quarter of a second of a partition beating 25,000 times a second, so
	// that the batcher, holding mergeHold records, has the next
	// records of most partitions to merge (1 MiB: Redis 0.79–0.88 against
	// 0.80–1.11 µs per reset; README, "Where the time goes").
	fetchMaxBytes = 512 << 10
	// fetchGrace is how long past fetchMaxWait a fetch's answer may take to
	// arrive before the connection is dropped and reopened at the next
	// offset.
	fetchGrace = time.Second
	// maxFetchGrace bounds the grace a partition reader grows for a broker
	// slower than fetchGrace (see partitionReader.grace).
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
	// next after its offset was out of range (see partitionReader.reset).
	reset uint64
	// answered is when the fetch's answer arrived, by the wall clock
	// (flatline_ingest_queue_seconds).
	answered time.Time
}

// partitionReader reads one partition of the signals topic, read_committed,
// and feeds the batcher. It fetches whole answers on its own connection to
// the partition's leader (kfetch.Conn: control records and aborted
// transactions are dropped there) and hands them on a chunk at a time: one
// hand-off and one socket deadline per fetch, not per record as with
// kafka-go's Reader.
type partitionReader struct {
	in        *Ingest
	dialer    *kafka.Dialer
	partition int
	out       chan<- chunk
	pos       *position

	// next is the offset of the next record to hand on; a new connection
	// starts there.
	next int64
	// grace stands for fetchGrace in this reader's fetch deadlines. A
	// broker that takes longer than fetchGrace to answer would fail every
	// fetch of the partition the same way, for ever: so a fetch ended by
	// its deadline doubles grace (up to maxFetchGrace) for the next, and a
	// fetch that fetchGrace would have allowed brings it back.
	grace time.Duration
	// res is the answer of the last fetch, reused: its buffers stop
	// growing at the partition's largest answer.
	res kfetch.Result
	// resets counts the out-of-range resets of this reader.
	resets uint64
	// backoff spaces the connections that follow a failed fetch; outage
	// logs such a run of failures once, and its end.
	backoff retry.Backoff
	outage  retry.Outage
	// guard learns the partition's traffic from the records read.
	guard *stallGuard
}

func (in *Ingest) newPartitionReader(dialer *kafka.Dialer, partition int, start int64, out chan<- chunk, pos *position) *partitionReader {
	return &partitionReader{
		in: in, dialer: dialer, partition: partition, out: out, pos: pos,
		next: start, grace: fetchGrace,
		backoff: retry.Backoff{Min: 10 * time.Millisecond, Max: time.Second},
		outage:  retry.Outage{Log: in.opts.Log, Down: "fetch failing, retrying with backoff", Up: "fetch resumed"},
	}
}

// run reads until ctx ends. After a fetch error — a fetch lost on the way
// included: its deadline (fetchMaxWait + grace) ends it — it closes the
// connection and opens a new one at the next offset, after a doubling
// backoff (10 ms to 1 s).
func (r *partitionReader) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.readConn(ctx)
		if ctx.Err() != nil {
			return
		}
		r.in.opts.Metrics.FetchErrors.Inc()
		r.outage.Failed(err, "partition", r.partition)
		if !retry.Sleep(ctx, r.backoff.Next()) {
			return
		}
	}
}

// readConn opens a connection to the partition's leader and fetches on it
// from r.next until a fetch fails.
func (r *partitionReader) readConn(ctx context.Context) error {
	k := r.in.opts.Kafka
	cfg := kfetch.DefaultConfig()
	// The deadline of each fetch is its context's (see fetch); this only
	// bounds the ListOffsets an out-of-range answer asks for.
	cfg.MaxWait, cfg.MaxBytes, cfg.Grace = fetchMaxWait, fetchMaxBytes, maxFetchGrace
	conn, err := kfetch.DialLeader(ctx, r.dialer, k.Brokers, k.SignalsTopic, r.partition, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		if err := r.fetch(ctx, conn); err != nil {
			return err
		}
	}
}

// fetch sends one fetch on conn and hands its records on. It returns nil
// when conn may carry the next fetch.
func (r *partitionReader) fetch(ctx context.Context, conn *kfetch.Conn) error {
	// The fetch's deadline, and how long the answer took, are the wall
	// clock's: the connection runs on it.
	sentAt := time.Now()
	// The watermark the fetch may move is business time, on the injected
	// clock like every watermark and deadline; read before the fetch goes
	// out, it is never later than the send.
	sentMs := r.in.opts.Now().UnixMilli()
	fctx, cancel := context.WithDeadline(ctx, sentAt.Add(fetchMaxWait+r.grace))
	err := conn.Fetch(fctx, r.in.opts.Kafka.SignalsTopic, r.partition, r.next, &r.res)
	cancel()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		r.grace = min(2*r.grace, maxFetchGrace)
		return err
	}
	if time.Since(sentAt)-fetchMaxWait <= fetchGrace {
		r.grace = fetchGrace
	}
	if errors.Is(err, kafka.OffsetOutOfRange) {
		return r.reset(ctx, sentMs)
	}
	if err != nil {
		return err
	}
	r.outage.Succeeded("partition", r.partition)
	r.backoff.Reset()
	res := &r.res
	// Every record appended before this fetch was sent lies below the
	// high-water mark it returned: once that is written, the partition's
	// watermark may move to the send time, as with a probe. The mark is the
	// high-water mark, not the last stable offset: the plain records behind
	// an open transaction were appended too, and cannot be read until it
	// ends, so an open transaction holds the watermark back.
	if hwm := res.HighWatermark; hwm > r.next {
		r.pos.addMark(mark{sentMs: sentMs, offset: hwm})
	}
	if res.NextOffset <= r.next {
		return nil // nothing new
	}
	// A producer's clock is believed up to the moment the records arrived:
	// with the decoder's max_skew on top, no heartbeat's time passes the
	// fetch time + ingest.max_skew (docs/operations.md, "Time").
	arrived := r.in.opts.Now()
	answered := time.Now()
	r.in.opts.Metrics.IngestFetch.Observe(answered.Sub(sentAt).Seconds())
	recs := res.Records
	if r.guard != nil {
		r.guard.observe(r.partition, recs, arrived.UnixMilli())
	}
	for len(recs) > 0 || r.next < res.NextOffset {
		n := min(len(recs), chunkMax)
		sl := copyRecords(recs[:n], arrived, r.in.headers)
		c := chunk{partition: r.partition, msgs: sl.recs, slab: sl, next: res.NextOffset, sentMs: sentMs, answered: answered}
		recs = recs[n:]
		if len(recs) > 0 {
			c.next = recs[0].Offset
		}
		select {
		case r.out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.next = c.next
	}
	return nil
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

// reset moves the reader to where kafka.start_offset points after the
// broker answered that r.next is out of range: below the log start
// (retention deleted it) or past the log end (the topic was recreated, an
// unclean leader election truncated it). The partition is never left
// unread; until the move is written the prober leaves its watermark alone
// (position.beginReset), since the written offset is not where the
// partition is read.
func (r *partitionReader) reset(ctx context.Context, sentMs int64) error {
	res := &r.res
	policy := r.in.opts.Kafka.StartOffset
	to := res.LogStartOffset
	if policy == kafkaconn.StartLatest {
		to = res.LastStableOffset
	}
	if to < 0 {
		return fmt.Errorf("offset %d of partition %d out of range, and the partition's bounds unknown", r.next, r.partition)
	}
	r.in.opts.Log.Warn("offset out of range; resetting by kafka.start_offset",
		"partition", r.partition, "offset", r.next, "reset_to", to, "start_offset", policy,
		"log_start", res.LogStartOffset, "last_stable", res.LastStableOffset)
	r.resets++
	r.pos.beginReset(r.resets)
	select {
	case r.out <- chunk{partition: r.partition, next: to, sentMs: sentMs, reset: r.resets}:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.next = to
	return nil
}
