package e2etest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewWriter is a producer keyed like any Kafka client (murmur2) that hands
// each WriteMessages call to the broker at once, in batches large enough
// for a fleet's round or a 1 MiB heartbeat.
func NewWriter(brokers []string, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchSize: 10000, BatchBytes: 16 << 20, BatchTimeout: time.Millisecond,
	}
}

// Produce writes msgs to topic in order (each partition keeps their order)
// and fails the test unless the broker acknowledged them all within a
// minute.
func Produce(t testing.TB, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := NewWriter(brokers, topic)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// ProduceRecords writes recs to topic with franz-go's client (an
// independent producer), keys partitioned by murmur2, and waits until every
// record is acknowledged.
func ProduceRecords(t testing.TB, brokers []string, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}
