package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/retry"
)

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
	// maxFetchGrace bounds the grace a partition reader grows for a broker
	// slower than fetchGrace (see partitionReader.grace).
	maxFetchGrace = 30 * time.Second
	// chunkMax is the most records handed to the batcher at once.
	chunkMax = 1024
)

// chunk is a run of consecutive records of one partition.
type chunk struct {
	partition int
	msgs      []kafka.Message
}

// partitionReader reads one partition of the signals topic and feeds the
// batcher. It fetches whole responses on its own connection to the
// partition's leader and hands them on a chunk at a time: one hand-off and
// one socket deadline per fetch, not per record as with kafka-go's Reader.
type partitionReader struct {
	in        *Ingest
	dialer    *kafka.Dialer
	partition int
	out       chan<- chunk
	pos       *position

	// next is the offset of the next record to hand on; a new connection
	// starts there.
	next int64
	// grace stands for fetchGrace in this reader's socket deadlines. A
	// broker that takes longer than fetchGrace to begin a large answer, or
	// to go on with it, would fail every fetch of the partition the same
	// way, for ever: so a fetch ended by its deadline doubles grace (up to
	// maxFetchGrace) for the next, and a fetch that fetchGrace would have
	// allowed brings it back.
	grace time.Duration
	// sizeHint is the capacity of the next chunk, the length of the last:
	// a quiet partition's fetches bring a few records, a busy one's many.
	sizeHint int
	// backoff spaces the connections that follow a failed fetch; outage
	// logs such a run of failures once, and its end.
	backoff retry.Backoff
	outage  retry.Outage
}

func (in *Ingest) newPartitionReader(dialer *kafka.Dialer, partition int, start int64, out chan<- chunk, pos *position) *partitionReader {
	return &partitionReader{
		in: in, dialer: dialer, partition: partition, out: out, pos: pos,
		next: start, grace: fetchGrace, sizeHint: 16,
		backoff: retry.Backoff{Min: 10 * time.Millisecond, Max: time.Second},
		outage:  retry.Outage{Log: in.opts.Log, Down: "fetch failing, retrying with backoff", Up: "fetch resumed"},
	}
}

// run reads until ctx ends. After a fetch error — a fetch lost on the way
// included: its socket deadline (fetchMaxWait + grace) ends it — it closes
// the connection and opens a new one at the next offset, after a doubling
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

// readConn opens a connection to the partition's leader at r.next and
// fetches on it until a fetch fails.
func (r *partitionReader) readConn(ctx context.Context) error {
	conn, err := r.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Cancelling ctx unblocks a fetch in progress.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := r.seek(conn); err != nil {
		return err
	}
	for {
		if err := r.fetch(ctx, conn); err != nil {
			return err
		}
	}
}

func (r *partitionReader) dial(ctx context.Context) (*kafka.Conn, error) {
	k := r.in.opts.Kafka
	err := errors.New("no Kafka broker to dial")
	for _, broker := range k.Brokers {
		var conn *kafka.Conn
		if conn, err = r.dialer.DialLeader(ctx, "tcp", broker, k.SignalsTopic, r.partition); err == nil {
			return conn, nil
		}
	}
	return nil, err
}

// fetch sends one fetch on conn and hands its records on. It returns nil
// when conn may carry the next fetch.
func (r *partitionReader) fetch(ctx context.Context, conn *kafka.Conn) error {
	// The socket's deadlines, and how long the answer took, are the wall
	// clock's: the connection runs on it.
	sentAt := time.Now()
	if err := conn.SetReadDeadline(sentAt.Add(fetchMaxWait + r.grace)); err != nil {
		return err
	}
	// The watermark the fetch may move is business time, on the injected
	// clock like every watermark and deadline; read before the fetch goes
	// out, it is never later than the send.
	sentMs := r.in.opts.Now().UnixMilli()
	b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: fetchMaxBytes, MaxWait: fetchMaxWait})
	// needed is the longest the fetch waited on the broker past what it
	// may hold the fetch: for the answer to begin, then for each chunk.
	needed := time.Since(sentAt) - fetchMaxWait
	// Every record appended before this fetch was sent lies below the
	// high-water mark it returned: once that is written, the partition's
	// watermark may move to the send time, as with a probe.
	if hwm := b.HighWaterMark(); b.Err() == nil && hwm > r.next {
		r.pos.addMark(mark{sentMs: sentMs, offset: hwm})
	}
	// The records stream from the socket as they are read: hand them on a
	// chunk at a time, so a slow batcher holds the fetch back instead of a
	// whole response piling up in memory.
	readFrom := time.Now()
	_ = conn.SetReadDeadline(readFrom.Add(r.grace))
	var msgs []kafka.Message
	err, read := error(nil), 0
	for err == nil {
		var m kafka.Message
		if m, err = b.ReadMessage(); err == nil {
			read++
			if msgs == nil {
				msgs = make([]kafka.Message, 0, r.sizeHint)
			}
			msgs = append(msgs, m)
		}
		if len(msgs) == chunkMax || (err != nil && len(msgs) > 0) {
			needed = max(needed, time.Since(readFrom))
			r.outage.Succeeded("partition", r.partition)
			r.backoff.Reset()
			r.next = msgs[len(msgs)-1].Offset + 1
			r.sizeHint = min(max(len(msgs), 16), chunkMax)
			select {
			case r.out <- chunk{partition: r.partition, msgs: msgs}:
			case <-ctx.Done():
				_ = b.Close()
				return ctx.Err()
			}
			msgs = nil
			readFrom = time.Now()
			_ = conn.SetReadDeadline(readFrom.Add(r.grace))
		}
	}
	r.next = max(r.next, b.Offset()) // past compacted-away offsets too
	err = b.Close()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.grace = min(2*r.grace, maxFetchGrace)
		return err
	}
	if max(needed, time.Since(readFrom)) <= fetchGrace {
		r.grace = fetchGrace
	}
	switch {
	case err == nil:
	case errors.Is(err, kafka.OffsetOutOfRange):
		return r.seek(conn)
	case errors.Is(err, kafka.RequestTimedOut) && (read > 0 || time.Since(sentAt) >= fetchMaxWait/2):
		// kafka-go's word for two fetches that went well: an empty answer
		// (nothing new within fetchMaxWait: every quiet partition, every
		// 250 ms) and an answer read to its end after the deadline it was
		// sent with (the batcher held the records back). The answer was
		// read whole and kafka-go keeps the connection, so the next fetch
		// goes out at once: a backoff and a new connection here would hold
		// back the records that reach a quiet partition, and with them the
		// firing watermark. (An empty answer much sooner than fetchMaxWait
		// is a broker's own timeout error: that one backs off.)
	default:
		return err
	}
	return nil
}

// seek positions conn at r.next. An offset the partition no longer holds
// (deleted by retention while flatline was away) moves to the first one it
// holds, logged; an offset past the end is an error (retried).
func (r *partitionReader) seek(conn *kafka.Conn) error {
	_, err := conn.Seek(r.next, kafka.SeekAbsolute)
	if !errors.Is(err, kafka.OffsetOutOfRange) {
		return err
	}
	first, last, oerr := conn.ReadOffsets()
	if oerr != nil {
		return oerr
	}
	if r.next >= first {
		return fmt.Errorf("offset %d of partition %d is out of range [%d, %d]: %w", r.next, r.partition, first, last, err)
	}
	r.in.opts.Log.Warn("committed offset no longer in the partition (retention); skipping to its first offset",
		"partition", r.partition, "offset", r.next, "first", first, "skipped", first-r.next)
	r.next = first
	_, err = conn.Seek(first, kafka.SeekAbsolute)
	return err
}
