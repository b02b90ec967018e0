package testenv

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// freshClient is a kafka-go client with a Transport of its own: the shared
// default Transport keeps the cluster's metadata for 6 s, which after a
// broker restart or leader move sends every request to the old leaders.
func freshClient(brokers []string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
}

// closeClient ends what a freshClient's Transport started.
func closeClient(c *kafka.Client) { c.Transport.(*kafka.Transport).CloseIdleConnections() }

// EndOffsets returns the high-water mark of each partition of topic.
func EndOffsets(t testing.TB, brokers []string, topic string, partitions int) map[int]int64 {
	t.Helper()
	return listEnds(t, brokers, topic, partitions, kafka.ReadUncommitted)
}

// StableOffsets returns the last stable offset of each partition of topic
// (ListOffsets read_committed): without transactions, the high-water mark,
// asked in a request a test can tell from flatline's probes.
func StableOffsets(t testing.TB, brokers []string, topic string, partitions int) map[int]int64 {
	t.Helper()
	return listEnds(t, brokers, topic, partitions, kafka.ReadCommitted)
}

func listEnds(t testing.TB, brokers []string, topic string, partitions int, iso kafka.IsolationLevel) map[int]int64 {
	t.Helper()
	c := freshClient(brokers)
	defer closeClient(c)
	var req []kafka.OffsetRequest
	for p := 0; p < partitions; p++ {
		req = append(req, kafka.LastOffsetOf(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}, IsolationLevel: iso})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	out := make(map[int]int64, partitions)
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out
}

// Committed returns group's committed offset of each partition of topic
// (-1 for none).
func Committed(t testing.TB, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	c := freshClient(brokers)
	defer closeClient(c)
	ps := make([]int, partitions)
	for p := range ps {
		ps[p] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Fatalf("offset fetch of %s: %v", topic, err)
	}
	if resp.Error != nil {
		t.Fatalf("offset fetch of %s: %v", topic, resp.Error)
	}
	out := make(map[int]int64, partitions)
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// CaughtUp reports whether group committed up to the end of every
// partition of topic that holds records.
func CaughtUp(t testing.TB, brokers []string, group, topic string, partitions int) bool {
	t.Helper()
	end := EndOffsets(t, brokers, topic, partitions)
	got := Committed(t, brokers, group, topic, partitions)
	for p, off := range end {
		if off > 0 && got[p] < off {
			return false
		}
	}
	return true
}

// ReadTopic reads every record of topic up to each partition's high-water
// mark as it is now: exactly that many records, so a duplicate shows up as
// an extra record rather than going unnoticed.
//
// It reads with franz-go's kgo, a client independent of the kafka-go code
// under test, and converts the records to kafka.Message for the callers.
// (kafka-go's Reader is no fit for a checker: it uses its MaxWait as the
// socket deadline for a fetch answer to begin, so a broker slower than that
// to assemble a large answer — kfake under -race with megabytes of records —
// fails every fetch of the partition and the Reader never gets past it.)
func ReadTopic(t testing.TB, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	end := EndOffsets(t, brokers, topic, partitions)
	from := map[int32]kgo.Offset{}
	left := 0
	for p := 0; p < partitions; p++ {
		if end[p] > 0 {
			from[int32(p)] = kgo.NewOffset().AtStart()
			left++
		}
	}
	if left == 0 {
		return nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20),
	)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []kafka.Message
	done := map[int32]bool{}
	for len(done) < left {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d partitions read to their end after 30s", topic, len(done), left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] || r.Offset >= end[int(r.Partition)] {
				return
			}
			m := kafka.Message{
				Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
				Key: r.Key, Value: r.Value, Time: r.Timestamp,
			}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
			}
			out = append(out, m)
			if r.Offset+1 >= end[int(r.Partition)] {
				done[r.Partition] = true
			}
		})
	}
	slices.SortFunc(out, func(a, b kafka.Message) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out
}

// AddPartitions grows topic to count partitions (a CreatePartitions
// request, as `kafka-topics --alter --partitions` sends) through franz-go,
// a client independent of flatline's.
func AddPartitions(t testing.TB, brokers []string, topic string, count int) {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(count)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp := KafkaRequest(t, "add partitions to "+topic, brokers, req).(*kmsg.CreatePartitionsResponse)
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("add partitions to %s: %v", topic, err)
		}
	}
}

// SetTopicConfig sets one config of topic (IncrementalAlterConfigs, through
// franz-go). kfake reports a topic's own configs, not the broker's, in
// DescribeConfigs, so a test that needs a topic limit sets it here.
func SetTopicConfig(t testing.TB, brokers []string, topic, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = key, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp := KafkaRequest(t, "alter "+topic, brokers, req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("alter %s %s=%s: error code %d", topic, key, value, r.ErrorCode)
		}
	}
}

// DeleteRecords moves the log start of partitions of topic to the given
// offsets (partition -> offset), as retention or `kafka-delete-records`
// would, and fails the test unless every partition's log starts there.
func DeleteRecords(t testing.TB, brokers []string, topic string, offsets map[int]int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := KafkaRequest(t, "delete records of "+topic, brokers, req).(*kmsg.DeleteRecordsResponse)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if want := offsets[int(p.Partition)]; p.ErrorCode != 0 || p.LowWatermark != want {
				t.Fatalf("delete records of %s/%d: error %d, log start %d, want %d", topic, p.Partition, p.ErrorCode, p.LowWatermark, want)
			}
		}
	}
}

// KafkaRequest sends req to brokers through a franz-go client of its own
// (opts follow the seed brokers) and returns the response; it fails the
// test, naming what it did, when the request is not answered within 10 s.
// The response's error codes are the caller's to check.
func KafkaRequest(t testing.TB, what string, brokers []string, req kmsg.Request, opts ...kgo.Opt) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return resp
}
