package kfetch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawBatch is a v2 record batch as a broker stores and serves it, built by
// hand so that a test controls every field kafka-go reads (and those it
// does not: maxTimestamp, lastOffsetDelta).
type rawBatch struct {
	base            int64
	attrs           int16
	producerID      int64
	firstTS, maxTS  int64
	lastOffsetDelta int32 // default: that of the last record
	records         []rawRecord
}

type rawRecord struct {
	offsetDelta int32
	tsDelta     int64
	key, value  []byte
}

const (
	attrTransactional = 0x10
	attrControl       = 0x20
	attrLogAppendTime = 0x08
)

// marker is a control record: COMMIT (typ 1) or ABORT (typ 0).
func marker(typ int16) rawRecord {
	k := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	v := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0) // version, coordinator epoch
	return rawRecord{key: k, value: v}
}

func (b rawBatch) appendTo(dst []byte) []byte {
	var recs []byte
	last := b.lastOffsetDelta
	for _, r := range b.records {
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, r.tsDelta)
		body = binary.AppendVarint(body, int64(r.offsetDelta))
		body = appendVarBytes(body, r.key)
		body = appendVarBytes(body, r.value)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
		last = max(last, r.offsetDelta)
	}
	kb := kmsg.RecordBatch{
		FirstOffset: b.base, PartitionLeaderEpoch: 0, Magic: 2, Attributes: b.attrs,
		LastOffsetDelta: last, FirstTimestamp: b.firstTS, MaxTimestamp: b.maxTS,
		ProducerID: b.producerID, ProducerEpoch: 0, FirstSequence: 0,
		NumRecords: int32(len(b.records)), Records: recs,
	}
	if b.producerID == 0 {
		kb.ProducerID, kb.ProducerEpoch, kb.FirstSequence = -1, -1, -1
	}
	raw := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return append(dst, raw...)
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// partitionOf is a fetch answer for one partition holding batches, decoded
// by kafka-go's protocol package as a fetch response's record set is.
func partitionOf(t *testing.T, aborted []fetch.ResponseTransaction, batches ...rawBatch) *fetch.ResponsePartition {
	t.Helper()
	var set []byte
	for _, b := range batches {
		set = b.appendTo(set)
	}
	buf := bytes.NewBuffer(binary.BigEndian.AppendUint32(nil, uint32(len(set))))
	buf.Write(set)
	p := &fetch.ResponsePartition{HighWatermark: 1000, LastStableOffset: 1000, AbortedTransactions: aborted}
	if _, err := p.RecordSet.ReadFrom(buf); err != nil {
		t.Fatalf("kafka-go reads the record set: %v", err)
	}
	return p
}
