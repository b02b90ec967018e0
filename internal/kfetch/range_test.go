package kfetch

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// A fetch below the log start (retention deleted the records) or past the
// end returns OffsetOutOfRange with the log start and last stable offset to
// reset to — also from a broker that, like Apache Kafka, leaves the offsets
// out of an error answer; a fetch at the end is no error and returns
// nothing.
func TestOutOfRangeOffsetReturnsTheBoundsToResetTo(t *testing.T) {
	t.Parallel()
	const topic = "signals"
	r := newRig(t, topic)
	produce(t, r.producer(t, topic), values("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")...)
	r.deleteRecords(t, topic, 4)

	for _, tc := range []struct {
		name string
		rt   kafka.RoundTripper
	}{
		{"offsets in the error answer (kfake)", r.tr},
		{"offsets left out (Apache Kafka)", stripErrorOffsets{r.tr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := New(&kafka.Client{Addr: kafka.TCP(r.brokers()...), Transport: tc.rt}, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, at := range []int64{0, 3, 11, 1 << 40} {
				res := &Result{Records: make([]Record, 3)}
				err := f.Fetch(context.Background(), topic, 0, at, res)
				if !errors.Is(err, kafka.OffsetOutOfRange) {
					t.Fatalf("fetch at %d: error %v, want OffsetOutOfRange", at, err)
				}
				if res.LogStartOffset != 4 || res.LastStableOffset != 10 || len(res.Records) != 0 || res.NextOffset != at {
					t.Errorf("fetch at %d: log start %d, LSO %d, %d records, NextOffset %d; want 4, 10, none, %d",
						at, res.LogStartOffset, res.LastStableOffset, len(res.Records), res.NextOffset, at)
				}
			}
			res := new(Result)
			if err := f.Fetch(context.Background(), topic, 0, 4, res); err != nil || len(res.Records) != 6 || res.Records[0].Offset != 4 {
				t.Errorf("fetch at the log start: %v, %d records; want 6 from offset 4", err, len(res.Records))
			}
			if err := f.Fetch(context.Background(), topic, 0, 10, res); err != nil || len(res.Records) != 0 || res.NextOffset != 10 || res.HighWatermark != 10 {
				t.Errorf("fetch at the end: %v, %d records, NextOffset %d, HWM %d; want no error, none, 10, 10",
					err, len(res.Records), res.NextOffset, res.HighWatermark)
			}
		})
	}
}

// stripErrorOffsets answers a fetch as Apache Kafka does when the
// partition has an error: high-water mark, last stable offset and log start
// all -1.
type stripErrorOffsets struct{ kafka.RoundTripper }

func (s stripErrorOffsets) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	m, err := s.RoundTripper.RoundTrip(ctx, addr, req)
	if resp, ok := m.(*fetch.Response); ok {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode != 0 {
					p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
				}
			}
		}
	}
	return m, err
}

// A partition the transport's cached metadata does not have fails as
// UnknownTopicOrPartition, as the broker's own answer would, so that a
// caller handles both alike.
func TestUnknownPartitionIsUnknownTopicOrPartition(t *testing.T) {
	t.Parallel()
	r := newRig(t, "signals")
	f := r.fetcher(t, DefaultConfig())
	for _, tc := range []struct {
		topic     string
		partition int
	}{{"signals", 7}, {"no-such-topic", 0}} {
		err := f.Fetch(context.Background(), tc.topic, tc.partition, 0, new(Result))
		if !errors.Is(err, kafka.UnknownTopicOrPartition) {
			t.Errorf("fetch %s/%d: %v, want UnknownTopicOrPartition", tc.topic, tc.partition, err)
		}
		if !errors.Is(err, protocol.ErrNoPartition) && !errors.Is(err, protocol.ErrNoTopic) {
			t.Errorf("fetch %s/%d: %v, want kafka-go's routing error kept", tc.topic, tc.partition, err)
		}
	}
}
