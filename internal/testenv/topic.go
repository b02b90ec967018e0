package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// EndOffsets returns the high-water mark of each partition of topic.
func EndOffsets(t testing.TB, brokers []string, topic string, partitions int) map[int]int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	var req []kafka.OffsetRequest
	for p := 0; p < partitions; p++ {
		req = append(req, kafka.LastOffsetOf(p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: req}})
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

// ReadTopic reads every record of topic up to each partition's high-water
// mark as it is now: exactly that many records, so a duplicate shows up as
// an extra record rather than going unnoticed.
func ReadTopic(t testing.TB, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	end := EndOffsets(t, brokers, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []kafka.Message
	for p := 0; p < partitions; p++ {
		if end[p] == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read %s/%d: %v", topic, p, err)
			}
			out = append(out, m)
			if m.Offset+1 >= end[p] {
				break
			}
		}
		_ = r.Close()
	}
	return out
}
