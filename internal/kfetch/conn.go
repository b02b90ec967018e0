package kfetch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/segmentio/kafka-go/protocol/listoffsets"
)

// Conn sends read_committed fetches over its own connection to one broker
// and decodes the answer itself, straight from the bytes read off the
// socket into the caller's Result: keys and values are not copied, a
// LogAppendTime batch's records get the broker's append time, NextOffset
// goes past offsets compaction removed at the end of a batch, and the heap
// a fetch holds is the answer's size (plus its decompressed batches) —
// what kafka-go's decoding loses or costs (see the package comment).
//
// A Conn serves one goroutine. After an error other than a partition error
// (kafka.Error), its connection is in an unknown state: Close it and dial
// again; DialLeader also finds a moved leader.
type Conn struct {
	pc           *protocol.Conn // versions negotiated; ListOffsets goes through it
	clientID     string
	cfg          Config
	fetchVersion int16
	corr         int32
	broken       error
	req          fetch.Request // reused: one topic, one partition
}

const (
	// minFetchVersion is the first Fetch with an isolation level and the
	// aborted-transaction list.
	minFetchVersion = 4
	// maxFetchVersion is the last Fetch kafka-go encodes (v12 is flexible).
	maxFetchVersion = 11
	// corrBase keeps this Conn's correlation IDs apart from those
	// protocol.Conn.RoundTrip numbers from 1.
	corrBase = 1 << 30
)

func newConn(pc *protocol.Conn, clientID string, fetchVersion int16, cfg Config) *Conn {
	c := &Conn{pc: pc, clientID: clientID, cfg: cfg, fetchVersion: fetchVersion, corr: corrBase}
	c.req = fetch.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(cfg.MaxWait.Milliseconds()),
		MinBytes:       int32(cfg.MinBytes),
		MaxBytes:       int32(cfg.MaxBytes),
		IsolationLevel: isolationReadCommitted,
		SessionEpoch:   -1, // session 0, epoch -1: a full fetch, no fetch session (KIP-227)
		Topics: []fetch.RequestTopic{{Partitions: []fetch.RequestPartition{{
			CurrentLeaderEpoch: -1,
			LogStartOffset:     -1,
			PartitionMaxBytes:  cfg.partitionMaxBytes(),
		}}}},
	}
	return c
}

// Close closes the connection.
func (c *Conn) Close() error { return c.pc.Close() }

// Fetch sends one fetch for topic/partition at offset and fills res (reset
// first) with the answer. Errors are as Fetcher.Fetch's, and a partition
// the broker does not lead returns kafka.NotLeaderForPartition (dial the
// leader again).
func (c *Conn) Fetch(ctx context.Context, topic string, partition int, offset int64, res *Result) error {
	res.reset(offset)
	if c.broken != nil {
		return fmt.Errorf("fetch %s/%d at %d: connection unusable after %w", topic, partition, offset, c.broken)
	}
	if err := c.roundTrip(ctx, topic, partition, offset, res); err != nil {
		c.broken = err
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	perr, err := res.parseFetch(c.fetchVersion, topic, partition, offset)
	if err != nil {
		// The answer was read whole, so the connection stays usable.
		res.reset(offset)
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	if perr == 0 {
		return nil
	}
	if perr == kafka.OffsetOutOfRange && (res.LogStartOffset < 0 || res.LastStableOffset < 0) {
		if err := c.bounds(ctx, topic, partition, res); err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w (log bounds unknown: %w)", topic, partition, offset, perr, err)
		}
	}
	return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, perr)
}

// roundTrip writes the request and reads the answer's body into res.raw.
func (c *Conn) roundTrip(ctx context.Context, topic string, partition int, offset int64, res *Result) error {
	deadline := time.Now().Add(c.cfg.MaxWait + c.cfg.Grace)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.pc.SetDeadline(deadline)
	// Cancelling ctx unblocks the socket at once. Once it has, the
	// deadline it moved may land on a later fetch: the Conn is done.
	stop := context.AfterFunc(ctx, func() { _ = c.pc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() && c.broken == nil {
			c.broken = ctx.Err()
		}
	}()

	c.corr++
	t, p := &c.req.Topics[0], &c.req.Topics[0].Partitions[0]
	t.Topic, p.Partition, p.FetchOffset = topic, int32(partition), offset
	if err := protocol.WriteRequest(c.pc, c.fetchVersion, c.corr, c.clientID, &c.req); err != nil {
		return ctxErr(ctx, err)
	}
	var head [8]byte // size, correlation ID
	if _, err := io.ReadFull(c.pc, head[:]); err != nil {
		return ctxErr(ctx, err)
	}
	size := int(int32(binary.BigEndian.Uint32(head[:4]))) - 4
	if corr := int32(binary.BigEndian.Uint32(head[4:])); corr != c.corr {
		return fmt.Errorf("answer to request %d, want %d", corr, c.corr)
	}
	if size < 0 || size > maxAnswer(c.cfg) {
		return fmt.Errorf("answer of %d bytes", size)
	}
	if cap(res.raw) < size {
		res.raw = make([]byte, size, max(size, 2*cap(res.raw)))
	}
	res.raw = res.raw[:size]
	if _, err := io.ReadFull(c.pc, res.raw); err != nil {
		return ctxErr(ctx, err)
	}
	return nil
}

// maxAnswer bounds the answer a Conn reads: MaxBytes may be exceeded by a
// single batch larger than it (the broker sends the first batch whole), but
// not by this much unless the stream is corrupt.
func maxAnswer(cfg Config) int { return max(2*cfg.MaxBytes, 256<<20) }

// bounds fills res's LogStartOffset and LastStableOffset with ListOffsets
// (earliest, and latest under read_committed: the last stable offset), one
// request each, as Kafka refuses a partition twice in one.
func (c *Conn) bounds(ctx context.Context, topic string, partition int, res *Result) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.pc.SetDeadline(dl)
	} else {
		_ = c.pc.SetDeadline(time.Now().Add(c.cfg.MaxWait + c.cfg.Grace))
	}
	for _, q := range []struct {
		ts  int64
		out *int64
	}{{kafka.FirstOffset, &res.LogStartOffset}, {kafka.LastOffset, &res.LastStableOffset}} {
		m, err := c.pc.RoundTrip(&listoffsets.Request{
			ReplicaID:      -1,
			IsolationLevel: isolationReadCommitted,
			Topics: []listoffsets.RequestTopic{{Topic: topic, Partitions: []listoffsets.RequestPartition{{
				Partition: int32(partition), CurrentLeaderEpoch: -1, Timestamp: q.ts,
			}}}},
		})
		if err != nil {
			c.broken = err
			return err
		}
		found := false
		for _, t := range m.(*listoffsets.Response).Topics {
			for _, p := range t.Partitions {
				if t.Topic == topic && p.Partition == int32(partition) {
					if p.ErrorCode != 0 {
						return kafka.Error(p.ErrorCode)
					}
					*q.out, found = p.Offset, true
				}
			}
		}
		if !found {
			return errors.New("list offsets: the answer leaves the partition out")
		}
	}
	return nil
}
