package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

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
