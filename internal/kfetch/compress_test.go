package kfetch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Batches compressed with each codec a producer may choose read exactly:
// every record once, with its offset, key, value and timestamp.
func TestCompressedBatchesReadExactly(t *testing.T) {
	t.Parallel()
	codecs := []struct {
		name string
		kgo  kgo.CompressionCodec
		want compress.Compression
	}{
		{"gzip", kgo.GzipCompression(), compress.Gzip},
		{"snappy", kgo.SnappyCompression(), compress.Snappy},
		{"lz4", kgo.Lz4Compression(), compress.Lz4},
		{"zstd", kgo.ZstdCompression(), compress.Zstd},
	}
	var topics []string
	for _, c := range codecs {
		topics = append(topics, c.name)
	}
	r := newRig(t, topics...)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl := r.producer(t, c.name, kgo.ProducerBatchCompression(c.kgo))
			at := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
			var rs []*kgo.Record
			var want []got
			for i := range 500 {
				id := fmt.Sprintf("device-%04d", i)
				rec := &kgo.Record{
					Key:       []byte(id),
					Value:     fmt.Appendf(nil, `{"device_id":%q,"ts":%d}`, id, at.UnixMilli()+int64(i)),
					Timestamp: at.Add(time.Duration(i) * time.Millisecond),
				}
				if i%3 == 0 { // headers are skipped, not mistaken for the value
					rec.Headers = []kgo.RecordHeader{{Key: "n", Value: fmt.Appendf(nil, "%d", i)}}
				}
				rs = append(rs, rec)
				want = append(want, got{int64(i), id, string(rec.Value), rec.Timestamp.UnixMilli(), false})
			}
			produce(t, cl, rs...)
			attrs := r.batchAttrs(t, c.name)
			if len(attrs) == 0 || slices.ContainsFunc(attrs, func(a protocol.Attributes) bool { return a.Compression() != c.want }) {
				t.Fatalf("batches written with attributes %v, want every one %v", attrs, c.want)
			}
			for name, f := range r.paths(t, DefaultConfig()) {
				recs, last := readToStable(t, f, c.name, 0)
				if !slices.Equal(recs, want) {
					t.Errorf("%s read %d records, want %d; first difference %s", name, len(recs), len(want), firstDiff(recs, want))
				}
				if last.NextOffset != 500 {
					t.Errorf("%s: NextOffset %d, want 500", name, last.NextOffset)
				}
			}
		})
	}
}

func firstDiff(a, b []got) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %+v, want %+v", i, a[i], b[i])
		}
	}
	return "in length"
}
