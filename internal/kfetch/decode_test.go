package kfetch

import (
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go/protocol/fetch"
)

func plainRecords(deltas ...int32) []rawRecord {
	var out []rawRecord
	for _, d := range deltas {
		out = append(out, rawRecord{offsetDelta: d, key: []byte("k"), value: []byte("v")})
	}
	return out
}

// The read_committed filter on one answer, batch shapes a broker serves
// but a test producer cannot easily provoke: two producers' transactions
// interleaved, one producer's aborted transactions listed newest first (as
// Redpanda does), a fetch offset inside the first batch, offsets removed by
// compaction before, inside and at the end of batches, a retained empty
// batch, and a last batch cut off by the answer's size limit.
func TestDecodeKeepsExactlyTheCommittedRecords(t *testing.T) {
	t.Parallel()
	const a, b = 7, 8 // transactional producers
	ans := answer{
		aborted: []fetch.ResponseTransaction{{ProducerID: a, FirstOffset: 14}, {ProducerID: a, FirstOffset: 3}},
		batches: []rawBatch{
			{base: 0, records: plainRecords(0, 1, 2)},
			{base: 3, attrs: attrTransactional, producerID: a, records: plainRecords(0, 1)}, // aborted
			{base: 5, records: plainRecords(0)},
			{base: 6, attrs: attrTransactional, producerID: b, records: plainRecords(0)}, // committed
			{base: 7, attrs: attrTransactional | attrControl, producerID: a, records: []rawRecord{marker(0)}},
			{base: 8, attrs: attrTransactional | attrControl, producerID: b, records: []rawRecord{marker(1)}},
			{base: 9, attrs: attrTransactional, producerID: a, records: plainRecords(0, 1)}, // committed
			{base: 11, attrs: attrTransactional | attrControl, producerID: a, records: []rawRecord{marker(1)}},
			{base: 12, records: plainRecords(1)},                                          // 12 compacted
			{base: 14, attrs: attrTransactional, producerID: a, records: plainRecords(0)}, // aborted
			{base: 15, lastOffsetDelta: 1},                                                // empty, 15-16
			{base: 17, attrs: attrTransactional | attrControl, producerID: a, records: []rawRecord{marker(0)}},
			{base: 18, attrs: attrTransactional, producerID: a, records: plainRecords(0)}, // a's next, not aborted
			{base: 19, lastOffsetDelta: 2, records: plainRecords(0)},                      // 20-21 compacted
		},
	}
	cut := rawBatch{base: 22, records: plainRecords(0)}.appendTo(nil)
	ans.tail = cut[:len(cut)-3]
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			res := decode(t, ans, 1)
			var offsets []int64
			for _, r := range res.Records {
				offsets = append(offsets, r.Offset)
			}
			if want := []int64{1, 2, 5, 6, 9, 10, 13, 18, 19}; !slices.Equal(offsets, want) {
				t.Errorf("kept offsets %v, want %v", offsets, want)
			}
			// Fetcher cannot see past 19: kafka-go drops lastOffsetDelta.
			want := map[string]int64{"Fetcher": 20, "Conn": 22}[name]
			if res.NextOffset != want {
				t.Errorf("NextOffset %d, want %d", res.NextOffset, want)
			}
		})
	}
}

// Null and empty keys and values stay apart: a null value (a tombstone) is
// nil, an empty one is not.
func TestDecodeKeepsNullApartFromEmpty(t *testing.T) {
	t.Parallel()
	ans := answer{batches: []rawBatch{{records: []rawRecord{
		{offsetDelta: 0, key: nil, value: []byte{}},
		{offsetDelta: 1, key: []byte{}, value: nil},
	}}}}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			res := decode(t, ans, 0)
			r0, r1 := res.Records[0], res.Records[1]
			if r0.Key != nil || r0.Value == nil || len(r0.Value) != 0 || r1.Key == nil || len(r1.Key) != 0 || r1.Value != nil {
				t.Errorf("record 0 key %#v value %#v, record 1 key %#v value %#v; want nil, empty, empty, nil", r0.Key, r0.Value, r1.Key, r1.Value)
			}
		})
	}
}

// On Apache Kafka, a LogAppendTime batch keeps the producer's first
// timestamp and carries the append time in maxTimestamp. Conn gives every
// record of such a batch the append time; through Fetcher, as kafka-go
// discards maxTimestamp, the records come back flagged with the producer's
// times.
func TestLogAppendTimeRecordsGetTheAppendTimeOnlyThroughConn(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	appended := created + 3_600_000
	ans := answer{batches: []rawBatch{
		{base: 0, attrs: attrLogAppendTime, firstTS: created, maxTS: appended, records: []rawRecord{
			{offsetDelta: 0, tsDelta: 0, value: []byte("a")},
			{offsetDelta: 1, tsDelta: 5, value: []byte("b")},
		}},
		{base: 2, firstTS: created, maxTS: created, records: []rawRecord{{value: []byte("c")}}},
	}}
	type rec struct {
		ms  int64
		lat bool
	}
	want := map[string][]rec{
		"Conn":    {{appended, true}, {appended, true}, {created, false}},
		"Fetcher": {{created, true}, {created + 5, true}, {created, false}},
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			res := decode(t, ans, 0)
			for i, r := range res.Records {
				if w := want[name][i]; r.Time.UnixMilli() != w.ms || r.LogAppendTime != w.lat {
					t.Errorf("record %d: time %d, LogAppendTime %v; want %d, %v", i, r.Time.UnixMilli(), r.LogAppendTime, w.ms, w.lat)
				}
			}
		})
	}
}
