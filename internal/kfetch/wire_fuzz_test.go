package kfetch

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Any answer decodes to records or an error, never a panic, and never
// records below a partition's fetched offset or a NextOffset behind it —
// whether it answers for one partition or for several, in the request's
// order or not, some with errors.
func FuzzParseFetch(f *testing.F) {
	plain := answer{batches: []rawBatch{{records: plainRecords(0, 1, 2)}}}
	txns := answer{
		aborted: []fetch.ResponseTransaction{{ProducerID: 7, FirstOffset: 0}},
		batches: []rawBatch{
			{attrs: attrTransactional, producerID: 7, records: plainRecords(0)},
			{base: 1, attrs: attrTransactional | attrControl, producerID: 7, records: []rawRecord{marker(0)}},
			{base: 2, attrs: attrLogAppendTime, maxTS: 5, records: plainRecords(0, 2)},
		},
	}
	otherTxns := answer{
		aborted: []fetch.ResponseTransaction{{ProducerID: 8, FirstOffset: 1}},
		batches: []rawBatch{
			{records: plainRecords(0)},
			{base: 1, attrs: attrTransactional, producerID: 8, records: plainRecords(0, 1)},
			{base: 3, attrs: attrTransactional | attrControl, producerID: 8, records: []rawRecord{marker(0)}},
		},
	}
	for _, raw := range [][]byte{
		fetchAnswerV11("t", 0, plain),
		fetchAnswerV11("t", 0, txns),
		fetchAnswerV11Parts("t",
			partAnswer{partition: 0, answer: txns},
			partAnswer{partition: 1, code: 6}, // NotLeaderForPartition
			partAnswer{partition: 2, answer: otherTxns}),
		fetchAnswerV11Parts("t", // out of the request's order, one left out
			partAnswer{partition: 2, answer: plain},
			partAnswer{partition: 0, answer: otherTxns}),
	} {
		f.Add(raw, int64(0))
		f.Add(raw, int64(1))
	}
	f.Fuzz(func(t *testing.T, raw []byte, offset int64) {
		parts := make([]Part, 3)
		for i := range parts {
			parts[i] = Part{Partition: i, Offset: offset + int64(i), Res: new(Result)}
			parts[i].Res.reset(parts[i].Offset)
		}
		if err := parseFetch(11, raw, "t", parts); err != nil {
			return
		}
		for _, p := range parts {
			if p.Err != nil {
				continue
			}
			for _, r := range p.Res.Records {
				if r.Offset < p.Offset {
					t.Fatalf("partition %d: record at %d from a fetch at %d", p.Partition, r.Offset, p.Offset)
				}
			}
			if p.Res.NextOffset < p.Offset {
				t.Fatalf("partition %d: NextOffset %d behind %d", p.Partition, p.Res.NextOffset, p.Offset)
			}
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
