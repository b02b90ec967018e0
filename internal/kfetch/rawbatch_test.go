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

// answer is one partition's part of a fetch answer, built by hand.
type answer struct {
	aborted []fetch.ResponseTransaction
	batches []rawBatch
	tail    []byte // appended after the batches: a batch cut off
}

func (a answer) recordSet() []byte {
	var set []byte
	for _, b := range a.batches {
		set = b.appendTo(set)
	}
	return append(set, a.tail...)
}

// decoder decodes an answer to a fetch at offset into a Result, as one of
// the two paths does.
type decoder func(t *testing.T, a answer, offset int64) *Result

var decoders = map[string]decoder{
	// Fetcher: kafka-go's protocol package reads the record set.
	"Fetcher": func(t *testing.T, a answer, offset int64) *Result {
		t.Helper()
		set := a.recordSet()
		buf := bytes.NewBuffer(binary.BigEndian.AppendUint32(nil, uint32(len(set))))
		buf.Write(set)
		p := &fetch.ResponsePartition{HighWatermark: 1000, LastStableOffset: 1000, AbortedTransactions: a.aborted}
		if _, err := p.RecordSet.ReadFrom(buf); err != nil {
			t.Fatalf("kafka-go reads the record set: %v", err)
		}
		res := new(Result)
		res.reset(offset)
		if err := res.decode(p, offset); err != nil {
			t.Fatal(err)
		}
		return res
	},
	// Conn: the whole Fetch v11 answer, parsed by wire.go.
	"Conn": func(t *testing.T, a answer, offset int64) *Result {
		t.Helper()
		res := new(Result)
		res.reset(offset)
		parts := []Part{{Partition: 0, Offset: offset, Res: res}}
		if err := parseFetch(11, fetchAnswerV11("t", 0, a), "t", parts); err != nil || parts[0].Err != nil {
			t.Fatalf("parse: %v, partition error %v", err, parts[0].Err)
		}
		return res
	},
}

// fetchAnswerV11 is the body of a Fetch v11 answer (after the correlation
// ID) for one partition.
func fetchAnswerV11(topic string, partition int32, a answer) []byte {
	return fetchAnswerV11Parts(topic, partAnswer{partition: partition, answer: a})
}

// partAnswer is one partition's section of a multi-partition answer.
type partAnswer struct {
	partition int32
	code      int16 // partition error
	answer
}

// fetchAnswerV11Parts is the body of a Fetch v11 answer for several
// partitions of topic, in the order given.
func fetchAnswerV11Parts(topic string, parts ...partAnswer) []byte {
	be := binary.BigEndian
	b := be.AppendUint32(nil, 0) // throttle
	b = be.AppendUint16(b, 0)    // error code
	b = be.AppendUint32(b, 0)    // session ID
	b = be.AppendUint32(b, 1)    // topics
	b = be.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = be.AppendUint32(b, uint32(len(parts)))
	for _, p := range parts {
		b = be.AppendUint32(b, uint32(p.partition))
		b = be.AppendUint16(b, uint16(p.code))
		b = be.AppendUint64(b, 1000) // high-water mark
		b = be.AppendUint64(b, 1000) // last stable offset
		b = be.AppendUint64(b, 0)    // log start
		b = be.AppendUint32(b, uint32(len(p.aborted)))
		for _, t := range p.aborted {
			b = be.AppendUint64(b, uint64(t.ProducerID))
			b = be.AppendUint64(b, uint64(t.FirstOffset))
		}
		b = be.AppendUint32(b, 0xffffffff) // preferred read replica: -1
		set := p.recordSet()
		b = be.AppendUint32(b, uint32(len(set)))
		b = append(b, set...)
	}
	return b
}
