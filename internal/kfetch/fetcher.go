package kfetch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Fetcher sends read_committed fetches for one partition at a time through
// a kafka.RoundTripper, which routes each to the partition's leader, and
// filters kafka-go's decoding of the answer. It holds no per-partition
// state and is safe for concurrent use; each caller brings its own Result.
type Fetcher struct {
	cfg    Config
	addr   net.Addr
	rt     kafka.RoundTripper
	client *kafka.Client // ListOffsets, after OffsetOutOfRange
}

// New returns a Fetcher sending through c's Transport (kafka.DefaultTransport
// when nil) to c's Addr. c.Timeout is not applied to fetches: a fetch's
// deadline is MaxWait+Grace, or the caller's context's if earlier.
func New(c *kafka.Client, cfg Config) (*Fetcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil || c.Addr == nil {
		return nil, errors.New("kfetch: the kafka.Client needs an Addr")
	}
	rt := c.Transport
	if rt == nil {
		rt = kafka.DefaultTransport
	}
	return &Fetcher{cfg: cfg, addr: c.Addr, rt: rt, client: &kafka.Client{Addr: c.Addr, Transport: rt}}, nil
}

// isolationReadCommitted is the Fetch (v4+) isolation level that stops at
// the last stable offset and returns the aborted-transaction list.
const isolationReadCommitted = int8(kafka.ReadCommitted)

// Fetch sends one fetch for topic/partition at offset and fills res (reset
// first) with what came back.
//
// A partition error of the broker returns as an error wrapping its
// kafka.Error (errors.Is(err, kafka.OffsetOutOfRange), …), with res's
// offsets as the broker gave them. On OffsetOutOfRange, LogStartOffset and
// LastStableOffset are always filled — asked with ListOffsets when the
// broker left them out, as Apache Kafka does — so the caller can reset to
// either end. A partition the transport's cached metadata does not know,
// or knows no leader for, returns an error wrapping both kafka-go's routing
// error (protocol.ErrNoTopic, ErrNoPartition, ErrNoLeader) and
// kafka.UnknownTopicOrPartition or kafka.LeaderNotAvailable. Other errors
// (connection, timeout, an answer that does not decode) leave res empty,
// with NextOffset == offset.
func (f *Fetcher) Fetch(ctx context.Context, topic string, partition int, offset int64, res *Result) error {
	res.reset(offset)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.MaxWait+f.cfg.Grace)
	defer cancel()
	m, err := f.rt.RoundTrip(ctx, f.addr, f.request(topic, partition, offset))
	if err != nil {
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, routingError(err))
	}
	resp, ok := m.(*fetch.Response)
	if !ok {
		return fmt.Errorf("fetch %s/%d at %d: answered with %T", topic, partition, offset, m)
	}
	res.Throttle = time.Duration(resp.ThrottleTimeMs) * time.Millisecond
	if resp.ErrorCode != 0 {
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, kafka.Error(resp.ErrorCode))
	}
	p := findPartition(resp, topic, partition)
	if p == nil {
		return fmt.Errorf("fetch %s/%d at %d: the answer leaves the partition out", topic, partition, offset)
	}
	if p.ErrorCode != 0 {
		res.HighWatermark, res.LastStableOffset, res.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
		perr := kafka.Error(p.ErrorCode)
		if perr == kafka.OffsetOutOfRange && (res.LogStartOffset < 0 || res.LastStableOffset < 0) {
			if err := f.bounds(ctx, topic, partition, res); err != nil {
				return fmt.Errorf("fetch %s/%d at %d: %w (log bounds unknown: %w)", topic, partition, offset, perr, err)
			}
		}
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, perr)
	}
	if err := res.decode(p, offset); err != nil {
		res.reset(offset)
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	return nil
}

func (f *Fetcher) request(topic string, partition int, offset int64) *fetch.Request {
	return &fetch.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(f.cfg.MaxWait.Milliseconds()),
		MinBytes:       int32(f.cfg.MinBytes),
		MaxBytes:       int32(f.cfg.MaxBytes),
		IsolationLevel: isolationReadCommitted,
		// Session 0, epoch -1: a full fetch that opens no fetch session
		// (KIP-227), so the broker keeps no state for this caller.
		SessionID:    0,
		SessionEpoch: -1,
		Topics: []fetch.RequestTopic{{
			Topic: topic,
			Partitions: []fetch.RequestPartition{{
				Partition:          int32(partition),
				CurrentLeaderEpoch: -1,
				FetchOffset:        offset,
				LogStartOffset:     -1,
				PartitionMaxBytes:  f.cfg.partitionMaxBytes(),
			}},
		}},
	}
}

func findPartition(resp *fetch.Response, topic string, partition int) *fetch.ResponsePartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != topic {
			continue
		}
		for j := range t.Partitions {
			if p := &t.Partitions[j]; p.Partition == int32(partition) {
				return p
			}
		}
	}
	return nil
}

// routingError adds the broker error code a routing failure of the
// transport's metadata cache stands for, so that a caller handles both the
// same way (refresh metadata, retry).
func routingError(err error) error {
	switch {
	case errors.Is(err, protocol.ErrNoTopic), errors.Is(err, protocol.ErrNoPartition):
		return fmt.Errorf("%w: %w", kafka.UnknownTopicOrPartition, err)
	case errors.Is(err, protocol.ErrNoLeader):
		return fmt.Errorf("%w: %w", kafka.LeaderNotAvailable, err)
	}
	return err
}

// bounds fills res's LogStartOffset and LastStableOffset with ListOffsets
// under read_committed, where "latest" is the last stable offset.
func (f *Fetcher) bounds(ctx context.Context, topic string, partition int, res *Result) error {
	resp, err := f.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics:         map[string][]kafka.OffsetRequest{topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}},
		IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil {
		return err
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition == partition {
			if po.Error != nil {
				return po.Error
			}
			res.LogStartOffset, res.LastStableOffset = po.FirstOffset, po.LastOffset
			return nil
		}
	}
	return errors.New("list offsets: the answer leaves the partition out")
}

// decode fills r from the partition's answer to a fetch at offset.
func (r *Result) decode(p *fetch.ResponsePartition, offset int64) error {
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
	for _, t := range p.AbortedTransactions {
		r.aborted.add(t.ProducerID, t.FirstOffset)
	}
	r.aborted.sort()
	switch rs := p.RecordSet.Records.(type) {
	case nil:
		return nil
	case *protocol.RecordStream:
		for _, b := range rs.Records {
			if err := r.decodeBatch(b, offset); err != nil {
				return err
			}
		}
		return nil
	default:
		return r.decodeBatch(rs, offset)
	}
}

func (r *Result) decodeBatch(b protocol.RecordReader, offset int64) error {
	switch b := b.(type) {
	case *protocol.RecordBatch:
		// The offsets between the last record read and a batch's base
		// were compacted away.
		r.NextOffset = max(r.NextOffset, b.BaseOffset)
		drop := b.Attributes.Transactional() && r.aborted.aborted(b.ProducerID, b.BaseOffset)
		return r.readRecords(b.Records, offset, drop, b.Attributes&attrLogAppendTime != 0)
	case *protocol.ControlBatch:
		r.NextOffset = max(r.NextOffset, b.BaseOffset)
		return r.readControl(b)
	case *protocol.MessageSet:
		// v0/v1 message sets predate transactions.
		return r.readRecords(b.Records, offset, false, b.Attributes&attrLogAppendTime != 0)
	default:
		return r.readRecords(b, offset, false, false)
	}
}

// readRecords reads every record of a batch, keeping those at or past
// offset unless drop. It closes each key and value, which returns kafka-go's
// page buffers to their pool once a batch's last reference is gone.
func (r *Result) readRecords(rr protocol.RecordReader, offset int64, drop, lat bool) error {
	for {
		rec, err := rr.ReadRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read record after offset %d: %w", r.NextOffset-1, err)
		}
		if !drop && rec.Offset >= offset {
			key, err := r.copyOut(rec.Key)
			if err != nil {
				return fmt.Errorf("read key of offset %d: %w", rec.Offset, err)
			}
			value, err := r.copyOut(rec.Value)
			if err != nil {
				return fmt.Errorf("read value of offset %d: %w", rec.Offset, err)
			}
			r.Records = append(r.Records, Record{Offset: rec.Offset, Time: rec.Time, Key: key, Value: value,
				Headers: appendHeaders(nil, rec.Headers), LogAppendTime: lat})
		}
		closeBytes(rec.Key)
		closeBytes(rec.Value)
		r.NextOffset = max(r.NextOffset, rec.Offset+1)
	}
}

// readControl consumes a control batch. Its first ABORT marker closes the
// producer's open aborted transaction; COMMIT markers (and any control type
// a later Kafka adds) need nothing. Like the Java consumer and franz-go, it
// acts on one marker per batch: a well-formed control batch holds one.
func (r *Result) readControl(b *protocol.ControlBatch) error {
	marked := false
	for {
		rec, err := b.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read control record after offset %d: %w", r.NextOffset-1, err)
		}
		if !marked && b.Attributes.Transactional() && rec.Key != nil && rec.Key.Len() >= len(r.ctlKey) {
			if _, err := io.ReadFull(rec.Key, r.ctlKey[:]); err != nil {
				return fmt.Errorf("read control record key of offset %d: %w", rec.Offset, err)
			}
			if binary.BigEndian.Uint16(r.ctlKey[2:]) == controlAbort {
				r.aborted.closeAt(b.ProducerID, rec.Offset)
				marked = true
			}
		}
		closeBytes(rec.Key)
		closeBytes(rec.Value)
		r.NextOffset = max(r.NextOffset, rec.Offset+1)
	}
}

// copyOut copies a key or value out of kafka-go's pooled pages, which are
// reused once closed. When the buffer is full it starts a new one rather
// than growing it: records already handed out keep pointing into the old,
// and only the newest (the largest) is kept for the next fetch.
func (r *Result) copyOut(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	n := b.Len()
	if n == 0 {
		return empty, nil
	}
	if cap(r.buf)-len(r.buf) < n {
		r.buf = make([]byte, 0, max(2*cap(r.buf), n, minChunk))
	}
	start := len(r.buf)
	r.buf = r.buf[:start+n]
	dst := r.buf[start : start+n : start+n]
	if _, err := io.ReadFull(b, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

func closeBytes(b protocol.Bytes) {
	if b != nil {
		_ = b.Close()
	}
}

// appendHeaders writes kafka-go's decoded headers back in the record
// format's header section (see Record.Headers); nil for none.
func appendHeaders(dst []byte, hs []kafka.Header) []byte {
	if len(hs) == 0 {
		return dst
	}
	zz := func(n int) uint64 { return uint64(int64(n)<<1) ^ uint64(int64(n)>>63) }
	dst = binary.AppendUvarint(dst, zz(len(hs)))
	for _, h := range hs {
		dst = binary.AppendUvarint(dst, zz(len(h.Key)))
		dst = append(dst, h.Key...)
		if h.Value == nil {
			dst = binary.AppendUvarint(dst, zz(-1))
			continue
		}
		dst = binary.AppendUvarint(dst, zz(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	return dst
}
