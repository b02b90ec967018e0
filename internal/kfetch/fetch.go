package kfetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Fetcher sends read_committed fetches for one partition at a time. It
// holds no per-partition state and is safe for concurrent use; each caller
// brings its own Result.
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
// (connection, timeout, a response that does not decode) leave res with
// NextOffset == offset.
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
