package kfetch

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Any answer decodes to records or an error, never a panic, and never
// records below the fetched offset or a NextOffset behind it.
func FuzzParseFetch(f *testing.F) {
	for _, a := range []answer{
		{batches: []rawBatch{{records: plainRecords(0, 1, 2)}}},
		{
			aborted: []fetch.ResponseTransaction{{ProducerID: 7, FirstOffset: 0}},
			batches: []rawBatch{
				{attrs: attrTransactional, producerID: 7, records: plainRecords(0)},
				{base: 1, attrs: attrTransactional | attrControl, producerID: 7, records: []rawRecord{marker(0)}},
				{base: 2, attrs: attrLogAppendTime, maxTS: 5, records: plainRecords(0, 2)},
			},
		},
	} {
		f.Add(fetchAnswerV11("t", 0, a), int64(0))
		f.Add(fetchAnswerV11("t", 0, a), int64(1))
	}
	f.Fuzz(func(t *testing.T, raw []byte, offset int64) {
		res := new(Result)
		res.reset(offset)
		res.raw = raw
		if _, err := res.parseFetch(11, "t", 0, offset); err != nil {
			return
		}
		for _, r := range res.Records {
			if r.Offset < offset {
				t.Fatalf("record at %d from a fetch at %d", r.Offset, offset)
			}
		}
		if res.NextOffset < offset {
			t.Fatalf("NextOffset %d behind %d", res.NextOffset, offset)
		}
	})
}

// Any batch with a valid CRC — any attributes, compression included, and
// any record bytes — decodes or fails, never panics.
func FuzzParseBatch(f *testing.F) {
	for _, b := range []rawBatch{
		{records: plainRecords(0, 1)},
		{attrs: attrTransactional | attrControl, producerID: 7, records: []rawRecord{marker(0)}},
	} {
		raw := b.appendTo(nil)
		f.Add(uint16(b.attrs), raw[batchHeader+offRecordCount:batchHeader+offRecords], raw[batchHeader+offRecords:])
	}
	f.Add(uint16(4), []byte{0, 0, 0, 1}, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	f.Fuzz(func(t *testing.T, attrs uint16, count, records []byte) {
		if len(count) != 4 {
			return
		}
		raw := rawBatch{attrs: int16(attrs), producerID: 7}.appendTo(nil)
		raw = append(raw[:batchHeader+offRecordCount], count...)
		raw = append(raw, records...)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batchHeader))
		binary.BigEndian.PutUint32(raw[batchHeader+offCRC:], crc32.Checksum(raw[batchHeader+offAttributes:], castagnoli))
		res := new(Result)
		res.reset(0)
		res.aborted.add(7, 0)
		_ = res.parseBatches(raw, 0)
	})
}
