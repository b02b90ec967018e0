package kfetch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// rig is a single-broker kfake on TCP with single-partition topics, a
// Fetcher on its own kafka-go Transport, and kgo (an independent client)
// to write with.
type rig struct {
	kafka *testenv.KafkaCluster
	tr    *kafka.Transport
}

func newRig(t *testing.T, topics ...string) *rig {
	t.Helper()
	k := testenv.Kafka(t, 1, topics...)
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &rig{kafka: k, tr: tr}
}

func (r *rig) brokers() []string { return r.kafka.Brokers() }

func (r *rig) fetcher(t *testing.T, cfg Config) *Fetcher {
	t.Helper()
	f, err := New(&kafka.Client{Addr: kafka.TCP(r.brokers()...), Transport: r.tr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fetcher is what Fetcher and Conn both offer.
type fetcher interface {
	Fetch(ctx context.Context, topic string, partition int, offset int64, res *Result) error
}

// paths are a Fetcher and a Conn to the (single) broker, both with cfg.
func (r *rig) paths(t *testing.T, cfg Config) map[string]fetcher {
	t.Helper()
	c, err := Dial(context.Background(), &kafka.Dialer{Timeout: 10 * time.Second}, r.brokers()[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return map[string]fetcher{"Fetcher": r.fetcher(t, cfg), "Conn": c}
}

// producer is a kgo client writing to partition 0 of topic.
func (r *rig) producer(t *testing.T, topic string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(r.brokers()...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes records to partition 0, one ProduceSync call (so that
// kgo may put them in one batch).
func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rec := range rs {
		rec.Partition = 0
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func values(vs ...string) []*kgo.Record {
	out := make([]*kgo.Record, len(vs))
	for i, v := range vs {
		out[i] = &kgo.Record{Key: []byte("k-" + v), Value: []byte(v)}
	}
	return out
}

// got is a record copied out of a Result.
type got struct {
	Offset        int64
	Key, Value    string
	TimeMs        int64
	LogAppendTime bool
}

func (g got) String() string { return fmt.Sprintf("%d:%s", g.Offset, g.Value) }

func copyRecords(dst []got, rs []Record) []got {
	for _, r := range rs {
		dst = append(dst, got{r.Offset, string(r.Key), string(r.Value), r.Time.UnixMilli(), r.LogAppendTime})
	}
	return dst
}

// readToStable fetches from offset until the partition's last stable
// offset, reusing one Result, and returns what came back and the last
// Result.
func readToStable(t *testing.T, f fetcher, topic string, offset int64) ([]got, *Result) {
	t.Helper()
	return readPartition(t, f, topic, 0, offset)
}

// readPartition is readToStable for any partition.
func readPartition(t *testing.T, f fetcher, topic string, partition int, offset int64) ([]got, *Result) {
	t.Helper()
	var out []got
	res := new(Result)
	for range 10_000 {
		if err := f.Fetch(context.Background(), topic, partition, offset, res); err != nil {
			t.Fatalf("fetch at %d: %v", offset, err)
		}
		for _, r := range res.Records {
			if r.Offset < offset {
				t.Fatalf("fetch at %d returned offset %d", offset, r.Offset)
			}
		}
		out = copyRecords(out, res.Records)
		if res.NextOffset < offset {
			t.Fatalf("NextOffset %d went back from %d", res.NextOffset, offset)
		}
		offset = res.NextOffset
		if offset >= res.LastStableOffset {
			return out, res
		}
	}
	t.Fatalf("no end after 10000 fetches; at %d, LSO %d", offset, res.LastStableOffset)
	return nil, nil
}

// endOffsets are the partition's high-water mark and last stable offset.
func (r *rig) endOffsets(t *testing.T, topic string) (hwm, lso int64) {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(r.brokers()...), Transport: r.tr, Timeout: 10 * time.Second}
	for _, iso := range []kafka.IsolationLevel{kafka.ReadUncommitted, kafka.ReadCommitted} {
		resp, err := c.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{
			Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0)}}, IsolationLevel: iso,
		})
		if err != nil {
			t.Fatal(err)
		}
		po := resp.Topics[topic][0]
		if po.Error != nil {
			t.Fatal(po.Error)
		}
		if iso == kafka.ReadUncommitted {
			hwm = po.LastOffset
		} else {
			lso = po.LastOffset
		}
	}
	return hwm, lso
}

// batchAttrs fetches partition 0 of topic read_uncommitted from offset 0
// with kafka-go's protocol layer and returns each batch's attributes.
func (r *rig) batchAttrs(t *testing.T, topic string) []protocol.Attributes {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := r.tr.RoundTrip(ctx, kafka.TCP(r.brokers()...), &fetch.Request{
		ReplicaID: -1, MaxWaitTime: 100, MinBytes: 1, MaxBytes: 64 << 20, SessionEpoch: -1,
		Topics: []fetch.RequestTopic{{Topic: topic, Partitions: []fetch.RequestPartition{{
			CurrentLeaderEpoch: -1, LogStartOffset: -1, PartitionMaxBytes: 64 << 20,
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.Attributes
	stream, _ := m.(*fetch.Response).Topics[0].Partitions[0].RecordSet.Records.(*protocol.RecordStream)
	if stream == nil {
		return nil
	}
	for _, b := range stream.Records {
		switch b := b.(type) {
		case *protocol.RecordBatch:
			out = append(out, b.Attributes)
		case *protocol.ControlBatch:
			out = append(out, b.Attributes)
		}
	}
	return out
}

// createTopic creates a single-partition topic with configs.
func (r *rig) createTopic(t *testing.T, topic string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := testenv.KafkaRequest(t, "create topic "+topic, r.brokers(), req).(*kmsg.CreateTopicsResponse)
	if e := resp.Topics[0].ErrorCode; e != 0 {
		t.Fatalf("create topic %s: error %d", topic, e)
	}
}
