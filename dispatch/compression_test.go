package dispatch

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestEventsCompressedAsConfigured: kafka.compression compresses the
// event batches; an independent client reads them, and reads which codec
// each batch carries.
func TestEventsCompressedAsConfigured(t *testing.T) {
	t.Parallel()
	// kgo's RecordAttrs.CompressionType: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
	for name, want := range map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testenv.Kafka(t, 1, testTopic)
			kc := testKafkaConfig(k.Brokers())
			kc.Compression = name
			p := publisherOn(t, kc, DefaultConfig(), metrics.New(metrics.Options{}))
			ctx := testenv.Context(t, 30*time.Second)
			deadline := time.Now().Add(-time.Second).UnixMilli()
			detected := time.UnixMilli(deadline + 10)
			cases, overrides := everyCombination(deadline, detected, 3)
			if err := p.Timeouts(ctx, 3, members(cases), overrides, detected); err != nil {
				t.Fatalf("timeouts: %v", err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers()...), kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got := 0
			for got < len(cases) && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
					got++
					if c := r.Attrs.CompressionType(); c != want {
						t.Errorf("event batch compressed with codec %d, want %d (%s)", c, want, name)
					}
				})
			}
			if got != len(cases) {
				t.Fatalf("read %d events, want %d", got, len(cases))
			}
		})
	}
}
