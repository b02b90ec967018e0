package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
)

func testKafkaConfig(brokers []string) kafkaconn.Config {
	k := kafkaconn.DefaultConfig()
	k.Brokers = brokers
	return k
}

// readTopic reads every record of topic: it asks for each partition's high
// watermark, then reads exactly that many, so a duplicate shows up as an
// extra record rather than going unnoticed.
func readTopic(t *testing.T, brokers []string, topic string, partitions int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	req := map[string][]kafka.OffsetRequest{}
	for p := range partitions {
		req[topic] = append(req[topic], kafka.LastOffsetOf(p))
	}
	lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	var out []kafka.Message
	for _, po := range lo.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets partition %d: %v", po.Partition, po.Error)
		}
		if po.LastOffset == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: po.Partition, MaxWait: 50 * time.Millisecond})
		for range po.LastOffset {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read partition %d: %v", po.Partition, err)
			}
			out = append(out, m)
		}
		if err := r.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}
	return out
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
