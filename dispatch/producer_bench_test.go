package dispatch

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// benchMessages are n messages of about 250 bytes (a 16-byte key and a
// JSON-like value), as a mass expiry publishes them.
func benchMessages(n int) []kafka.Message {
	at := time.UnixMilli(1_700_000_000_000)
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		key := fmt.Sprintf("device-%09d", i)
		value := fmt.Sprintf(`{"type":"timeout","device_id":%q,"deadline_ms":%d,"detected_ms":%d,"pad":"%s"}`,
			key, at.UnixMilli()-int64(i), at.UnixMilli(), strings.Repeat("x", 134))
		msgs[i] = kafka.Message{Key: []byte(key), Value: []byte(value), Time: at}
	}
	return msgs
}

// BenchmarkProducerSend: one Send of 2,000 ~250-byte messages to a kfake
// topic of testParts partitions, acknowledged (kfake's work included).
func BenchmarkProducerSend(b *testing.B) {
	for _, codec := range []string{"none", "lz4"} {
		b.Run(codec, func(b *testing.B) {
			k := testenv.Kafka(b, testParts, testTopic)
			kc := testKafkaConfig(k.Brokers())
			kc.Compression = codec
			p, err := newProducer(kc.Brokers, testTopic, kc.Transport, 0, kc.Codec())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			msgs := benchMessages(2000)
			ctx := context.Background()
			if err := p.Send(ctx, msgs); err != nil { // metadata, connections
				b.Fatal(err)
			}
			b.SetBytes(int64(len(msgs) * len(msgs[0].Value)))
			b.ResetTimer()
			for range b.N {
				if err := p.Send(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProduceRequestEncode: building and encoding (as the transport
// does, to io.Discard) the produce request of 2,000 ~250-byte messages
// over testParts partitions, without a broker.
func BenchmarkProduceRequestEncode(b *testing.B) {
	for _, codec := range []string{"none", "lz4"} {
		b.Run(codec, func(b *testing.B) {
			kc := testKafkaConfig([]string{"127.0.0.1:9092"})
			kc.Compression = codec
			p := &producer{topic: testTopic, codec: kc.Codec()}
			msgs := benchMessages(2000)
			s := &send{msgs: msgs}
			parts := map[int][]ref{}
			all := []int{0, 1, 2, 3}
			for i := range msgs {
				part := p.balancer.Balance(msgs[i], all...)
				parts[part] = append(parts[part], ref{s, i})
			}
			b.SetBytes(int64(len(msgs) * len(msgs[0].Value)))
			b.ReportAllocs()
			for range b.N {
				req, err := p.request(parts)
				if err != nil {
					b.Fatal(err)
				}
				var msg protocol.Message = req
				if pm, ok := msg.(protocol.PreparedMessage); ok {
					pm.Prepare(8)
				}
				if err := protocol.WriteRequest(io.Discard, 8, 1, "flatline", msg); err != nil {
					b.Fatal(err)
				}
				release(req)
			}
		})
	}
}
