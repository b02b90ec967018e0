package kfetch

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/testenv"
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
	testenv.DeleteRecords(t, r.brokers(), topic, map[int]int64{0: 4})

	conn := r.paths(t, DefaultConfig())["Conn"]
	for _, tc := range []struct {
		name string
		f    func(t *testing.T) fetcher
	}{
		{"Fetcher, offsets in the error answer (kfake)", func(t *testing.T) fetcher { return r.fetcher(t, DefaultConfig()) }},
		{"Fetcher, offsets left out (Apache Kafka)", func(t *testing.T) fetcher {
			f, err := New(&kafka.Client{Addr: kafka.TCP(r.brokers()...), Transport: stripErrorOffsets{r.tr}}, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{"Conn", func(*testing.T) fetcher { return conn }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f(t)
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

// Conn asks for the log bounds itself when the broker leaves them out of an
// OffsetOutOfRange answer (kfake does not, so this asks directly).
func TestConnAsksForTheLogBounds(t *testing.T) {
	t.Parallel()
	const topic = "signals"
	r := newRig(t, topic)
	produce(t, r.producer(t, topic), values("0", "1", "2", "3", "4", "5")...)
	testenv.DeleteRecords(t, r.brokers(), topic, map[int]int64{0: 2})
	c := r.paths(t, DefaultConfig())["Conn"].(*Conn)
	res := new(Result)
	res.reset(0)
	if err := c.bounds(context.Background(), topic, 0, res); err != nil || res.LogStartOffset != 2 || res.LastStableOffset != 6 {
		t.Errorf("bounds: %v, log start %d, LSO %d; want 2, 6", err, res.LogStartOffset, res.LastStableOffset)
	}
	if err := c.Fetch(context.Background(), topic, 0, 2, res); err != nil || len(res.Records) != 4 {
		t.Errorf("fetch after asking: %v, %d records; want the connection usable, 4 records", err, len(res.Records))
	}
}

// A partition that does not exist fails as UnknownTopicOrPartition on both
// paths: from the broker's answer (Conn) or from the transport's cached
// metadata (Fetcher, which keeps kafka-go's routing error too), so that a
// caller handles both alike.
func TestUnknownPartitionIsUnknownTopicOrPartition(t *testing.T) {
	t.Parallel()
	r := newRig(t, "signals")
	for name, f := range r.paths(t, DefaultConfig()) {
		for _, tc := range []struct {
			topic     string
			partition int
		}{{"signals", 7}, {"no-such-topic", 0}} {
			err := f.Fetch(context.Background(), tc.topic, tc.partition, 0, new(Result))
			if !errors.Is(err, kafka.UnknownTopicOrPartition) {
				t.Errorf("%s: fetch %s/%d: %v, want UnknownTopicOrPartition", name, tc.topic, tc.partition, err)
			}
			if name == "Fetcher" && !errors.Is(err, protocol.ErrNoPartition) && !errors.Is(err, protocol.ErrNoTopic) {
				t.Errorf("%s: fetch %s/%d: %v, want kafka-go's routing error kept", name, tc.topic, tc.partition, err)
			}
		}
	}
}

// A Conn to a broker that does not lead the partition gets
// NotLeaderForPartition and stays usable; DialLeader, asking afresh, finds
// the leader.
func TestConnToAFollowerIsToldNotLeader(t *testing.T) {
	t.Parallel()
	const topic = "signals"
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	d := &kafka.Dialer{Timeout: 10 * time.Second}
	leader, err := d.LookupLeader(ctx, "tcp", c.ListenAddrs()[0], topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	other := c.ListenAddrs()[0]
	if other == net.JoinHostPort(leader.Host, strconv.Itoa(leader.Port)) {
		other = c.ListenAddrs()[1]
	}
	follower, err := Dial(ctx, d, other, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	res := new(Result)
	for range 2 {
		if err := follower.Fetch(ctx, topic, 0, 0, res); !errors.Is(err, kafka.NotLeaderForPartition) {
			t.Fatalf("fetch from a follower: %v, want NotLeaderForPartition", err)
		}
	}
	lc, err := DialLeader(ctx, d, c.ListenAddrs(), topic, 0, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if err := lc.Fetch(ctx, topic, 0, 0, res); err != nil {
		t.Errorf("fetch from the leader DialLeader found: %v", err)
	}
}
