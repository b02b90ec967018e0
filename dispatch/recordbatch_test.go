package dispatch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/internal/testenv"
)

var codecNames = map[string]kafka.Compression{"none": 0, "gzip": kafka.Gzip, "snappy": kafka.Snappy, "lz4": kafka.Lz4, "zstd": kafka.Zstd}

// awkwardMessages: null and empty keys and values, headers (a null value
// among them), times out of order, a long value (multi-byte varints).
func awkwardMessages() []kafka.Message {
	at := time.UnixMilli(1_700_000_000_123)
	return []kafka.Message{
		{Key: []byte("device-1"), Value: []byte(`{"a":1}`), Time: at},
		{Key: nil, Value: []byte("no key"), Time: at.Add(5 * time.Millisecond)},
		{Key: []byte{}, Value: nil, Time: at.Add(-3 * time.Millisecond)},
		{Key: []byte("h"), Value: bytes.Repeat([]byte("v"), 300), Time: at.Add(time.Hour), Headers: []kafka.Header{
			{Key: "trace", Value: []byte("abc")}, {Key: "", Value: nil}, {Key: "empty", Value: []byte{}},
		}},
		{Key: []byte("last"), Value: []byte("x"), Time: at.Add(2 * time.Millisecond)},
	}
}

func refsOf(msgs []kafka.Message) []ref {
	s := &send{msgs: msgs}
	refs := make([]ref, len(msgs))
	for i := range refs {
		refs[i] = ref{s, i}
	}
	return refs
}

// kafkaGoRecordSet is the record set kafka-go's own encoder writes for
// msgs (as the producer sent before it encoded its own).
func kafkaGoRecordSet(t *testing.T, msgs []kafka.Message, codec kafka.Compression) []byte {
	t.Helper()
	recs := make([]protocol.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = protocol.Record{Time: m.Time, Headers: m.Headers}
		if m.Key != nil {
			recs[i].Key = protocol.NewBytes(m.Key)
		}
		if m.Value != nil {
			recs[i].Value = protocol.NewBytes(m.Value)
		}
	}
	rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(codec), Records: protocol.NewRecordReader(recs...)}
	var buf bytes.Buffer
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRecordSetMatchesKafkaGo: uncompressed, the record set is kafka-go's
// byte for byte; compressed, its header is (but for length and CRC), and
// kafka-go and franz-go's kmsg read back every record, headers included.
func TestRecordSetMatchesKafkaGo(t *testing.T) {
	msgs := awkwardMessages()
	for name, codec := range codecNames {
		t.Run(name, func(t *testing.T) {
			var rs recordSet
			for range 2 { // the second time into the reused buffers
				if err := rs.encode(refsOf(msgs), codec); err != nil {
					t.Fatal(err)
				}
			}
			got := slices.Clone(rs.b)
			want := kafkaGoRecordSet(t, msgs, codec)
			if codec == 0 && !bytes.Equal(got, want) {
				t.Fatalf("record set differs from kafka-go's:\n got %x\nwant %x", got, want)
			}
			// The same header but for size, batchLength and CRC.
			mask := func(b []byte) []byte {
				b = slices.Clone(b[:rsRecords])
				clear(b[0:4])
				clear(b[rsBatchLength : rsBatchLength+4])
				clear(b[rsCRC : rsCRC+4])
				return b
			}
			if !bytes.Equal(mask(got), mask(want)) {
				t.Errorf("batch header differs from kafka-go's:\n got %x\nwant %x", mask(got), mask(want))
			}
			if n, _ := rs.Read(make([]byte, len(got)+1)); n != len(got) {
				t.Errorf("reader gives %d bytes of %d", n, len(got))
			}

			// kafka-go reads it back (it checks the CRC).
			var dec protocol.RecordSet
			if _, err := dec.ReadFrom(bytes.NewReader(got)); err != nil {
				t.Fatalf("kafka-go reads it: %v", err)
			}
			if c := dec.Attributes.Compression(); c != codec {
				t.Errorf("compression %v, want %v", c, codec)
			}
			for i := 0; ; i++ {
				r, err := dec.Records.ReadRecord()
				if err == io.EOF {
					if i != len(msgs) {
						t.Errorf("read %d records, want %d", i, len(msgs))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				m := msgs[i]
				if r.Offset != int64(i) || !r.Time.Equal(m.Time) {
					t.Errorf("record %d: offset %d time %v, want %d %v", i, r.Offset, r.Time, i, m.Time)
				}
				key, _ := protocol.ReadAll(r.Key)
				value, _ := protocol.ReadAll(r.Value)
				if (r.Key == nil) != (m.Key == nil) || !bytes.Equal(key, m.Key) || (r.Value == nil) != (m.Value == nil) || !bytes.Equal(value, m.Value) {
					t.Errorf("record %d: key %q (nil %v) value %q (nil %v), want %q %q", i, key, r.Key == nil, value, r.Value == nil, m.Key, m.Value)
				}
				if !headersEqual(r.Headers, m.Headers) {
					t.Errorf("record %d: headers %q, want %q", i, r.Headers, m.Headers)
				}
			}

			// kmsg reads the batch header; the CRC covers attributes … end.
			var kb kmsg.RecordBatch
			if err := kb.ReadFrom(got[4:]); err != nil {
				t.Fatalf("kmsg reads it: %v", err)
			}
			if kb.Magic != 2 || kb.NumRecords != int32(len(msgs)) || kb.LastOffsetDelta != int32(len(msgs)-1) ||
				kb.FirstTimestamp != msgs[0].Time.UnixMilli() || kb.MaxTimestamp != msgs[3].Time.UnixMilli() ||
				kb.ProducerID != -1 || kb.ProducerEpoch != -1 || kb.FirstSequence != -1 || kb.PartitionLeaderEpoch != -1 ||
				kb.Attributes&7 != int16(codec) || int(kb.Length) != len(got)-4-12 || int(binary.BigEndian.Uint32(got)) != len(got)-4 {
				t.Errorf("batch header: %+v", kb)
			}
			if crc := crc32.Checksum(got[rsAttributes:], castagnoli); uint32(kb.CRC) != crc {
				t.Errorf("CRC %08x, want %08x", uint32(kb.CRC), crc)
			}
		})
	}
}

func headersEqual(a, b []kafka.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) || (a[i].Value == nil) != (b[i].Value == nil) {
			return false
		}
	}
	return true
}

// TestRecordSetZeroTime: a message without a Time is stamped now, as
// kafka-go does.
func TestRecordSetZeroTime(t *testing.T) {
	before := time.Now().UnixMilli()
	var rs recordSet
	if err := rs.encode(refsOf([]kafka.Message{{Value: []byte("a")}, {Value: []byte("b")}}), 0); err != nil {
		t.Fatal(err)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(rs.b[4:]); err != nil {
		t.Fatal(err)
	}
	if kb.FirstTimestamp < before || kb.FirstTimestamp > time.Now().UnixMilli() || kb.MaxTimestamp != kb.FirstTimestamp {
		t.Errorf("timestamps %d, %d; want now (%d…)", kb.FirstTimestamp, kb.MaxTimestamp, before)
	}
}

// TestProducerRecordsReadByFranzGo: what the producer sends with every
// codec, null keys and headers included, kfake takes and franz-go reads
// back as sent.
func TestProducerRecordsReadByFranzGo(t *testing.T) {
	t.Parallel()
	for name, codec := range codecNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := testenv.Kafka(t, 1, testTopic)
			kc := testKafkaConfig(k.Brokers())
			p, err := newProducer(kc.Brokers, testTopic, kc.Transport, 0, codec)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx := testenv.Context(t, 30*time.Second)
			msgs := awkwardMessages()
			if err := p.Send(ctx, msgs); err != nil {
				t.Fatalf("send: %v", err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers()...), kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var got []*kgo.Record
			for len(got) < len(msgs) && ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				for _, e := range fs.Errors() {
					t.Fatalf("fetch: %v", e.Err)
				}
				got = append(got, fs.Records()...)
			}
			if len(got) != len(msgs) {
				t.Fatalf("read %d records, want %d", len(got), len(msgs))
			}
			for i, r := range got {
				m := msgs[i]
				if (r.Key == nil) != (m.Key == nil) || !bytes.Equal(r.Key, m.Key) || !bytes.Equal(r.Value, m.Value) || !r.Timestamp.Equal(m.Time) || r.Offset != int64(i) {
					t.Errorf("record %d: key %q value %.20q at %v offset %d; want %q %.20q at %v", i, r.Key, r.Value, r.Timestamp, r.Offset, m.Key, m.Value, m.Time)
				}
				if c := r.Attrs.CompressionType(); c != uint8(codec) {
					t.Errorf("record %d: codec %d, want %d", i, c, codec)
				}
				var hs []kafka.Header
				for _, h := range r.Headers {
					hs = append(hs, kafka.Header{Key: h.Key, Value: h.Value})
				}
				if !headersEqual(hs, m.Headers) {
					t.Errorf("record %d: headers %q, want %q", i, hs, m.Headers)
				}
			}
		})
	}
}
