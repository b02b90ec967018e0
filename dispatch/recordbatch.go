package dispatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// recordSet is one partition's records as a produce request carries them:
// the set's int32 size, then one v2 record batch (magic 2), as kafka-go's
// protocol.RecordSet writes it (writeToVersion2) and internal/kfetch reads
// it. It is encoded in one go into b, handed to kafka-go's rawproduce API
// (protocol.RawRecordSet, which copies it to the request as it is) and
// reused for later requests: kafka-go's reflective encoder wrote each
// record field by field into a page buffer, a sixth of flatline's CPU in a
// mass expiry.
type recordSet struct {
	bytes.Reader // over b, for protocol.RawRecordSet

	b   []byte
	raw []byte // the records before compression
	w   appendWriter
}

var recordSets = sync.Pool{New: func() any { return new(recordSet) }}

// Offsets in a record set, from its int32 size: the v2 batch header
// (baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic
// int8, crc uint32, attributes int16, lastOffsetDelta int32,
// firstTimestamp int64, maxTimestamp int64, producerId int64,
// producerEpoch int16, baseSequence int32, records int32) and the records.
const (
	rsBatchLength     = 4 + 8
	rsCRC             = rsBatchLength + 4 + 4 + 1
	rsAttributes      = rsCRC + 4 // the CRC covers attributes … end
	rsLastOffsetDelta = rsAttributes + 2
	rsFirstTS         = rsLastOffsetDelta + 4
	rsMaxTS           = rsFirstTS + 8
	rsCount           = rsMaxTS + 8 + 8 + 2 + 4
	rsRecords         = rsCount + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode makes s the record set of refs' messages, in order, their
// records compressed with codec (0: none), in steps: the batch header with
// its lengths, timestamps and CRC left blank (appendBatchHeader), the
// records (appendRecords), their compression (compress), then the blanks
// filled in. Like kafka-go, it takes the first message's time (now for a
// zero Time) as the batch's first timestamp, each record's time as a delta
// from it, and leaves the producer id, epoch and sequence unset (-1).
func (s *recordSet) encode(refs []ref, codec kafka.Compression) error {
	if len(refs) == 0 {
		return fmt.Errorf("no records")
	}
	// Sized at once, not doubled record by record: recordSize bounds a
	// record, and a pooled recordSet keeps its buffers.
	size := 0
	for _, r := range refs {
		size += recordSize(&r.s.msgs[r.i])
	}
	b := s.b[:0]
	if codec == 0 {
		b = slices.Grow(b, rsRecords+size)
	}
	b = appendBatchHeader(b, codec, len(refs))
	recs := b
	if codec != 0 {
		recs = slices.Grow(s.raw[:0], size)
	}
	recs, first, maxTS := appendRecords(recs, refs)
	if codec == 0 {
		b = recs
	} else {
		s.raw = recs
		var err error
		if b, err = s.compress(b, recs, codec); err != nil {
			return err
		}
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[rsBatchLength:], uint32(len(b)-rsBatchLength-4))
	binary.BigEndian.PutUint32(b[rsLastOffsetDelta:], uint32(len(refs)-1))
	binary.BigEndian.PutUint64(b[rsFirstTS:], uint64(first))
	binary.BigEndian.PutUint64(b[rsMaxTS:], uint64(maxTS))
	binary.BigEndian.PutUint32(b[rsCRC:], crc32.Checksum(b[rsAttributes:], castagnoli))
	s.b = b
	s.Reset(b)
	return nil
}

// appendBatchHeader appends the set's size and a v2 batch header of count
// records, its lengths, lastOffsetDelta, timestamps and CRC zero.
func appendBatchHeader(b []byte, codec kafka.Compression, count int) []byte {
	b = append(b, 0, 0, 0, 0) // size
	b = binary.BigEndian.AppendUint64(b, 0)
	b = append(b, 0, 0, 0, 0)                        // batchLength
	b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // partitionLeaderEpoch -1
	b = append(b, 2)                                 // magic
	b = append(b, 0, 0, 0, 0)                        // crc
	b = binary.BigEndian.AppendUint16(b, uint16(codec)&7)
	b = append(b, make([]byte, 4+8+8)...)            // lastOffsetDelta, first and max timestamps
	b = binary.BigEndian.AppendUint64(b, ^uint64(0)) // producerId -1
	b = binary.BigEndian.AppendUint16(b, ^uint16(0)) // producerEpoch -1
	b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // baseSequence -1
	return binary.BigEndian.AppendUint32(b, uint32(count))
}

// appendRecords appends the v2 records of refs' messages and returns the
// batch's first and max timestamps.
func appendRecords(recs []byte, refs []ref) (_ []byte, first, maxTS int64) {
	var now int64
	for i, r := range refs {
		m := &r.s.msgs[r.i]
		t := millis(m.Time)
		if t == 0 {
			if now == 0 {
				now = time.Now().UnixMilli()
			}
			t = now
		}
		if i == 0 {
			first = t
		}
		maxTS = max(maxTS, t) // from 0, as kafka-go
		delta := t - first
		n := 1 + varintLen(delta) + varintLen(int64(i)) + nullBytesLen(m.Key) + nullBytesLen(m.Value) + varintLen(int64(len(m.Headers)))
		for _, h := range m.Headers {
			n += varintLen(int64(len(h.Key))) + len(h.Key) + nullBytesLen(h.Value)
		}
		recs = binary.AppendVarint(recs, int64(n))
		recs = append(recs, 0) // attributes
		recs = binary.AppendVarint(recs, delta)
		recs = binary.AppendVarint(recs, int64(i)) // offsetDelta
		recs = appendNullBytes(recs, m.Key)
		recs = appendNullBytes(recs, m.Value)
		recs = binary.AppendVarint(recs, int64(len(m.Headers)))
		for _, h := range m.Headers {
			recs = binary.AppendVarint(recs, int64(len(h.Key)))
			recs = append(recs, h.Key...)
			recs = appendNullBytes(recs, h.Value)
		}
	}
	return recs, first, maxTS
}

// compress appends recs compressed with codec to the header b.
func (s *recordSet) compress(b, recs []byte, codec kafka.Compression) ([]byte, error) {
	c := codec.Codec()
	if c == nil {
		return nil, fmt.Errorf("unknown compression %d", codec)
	}
	s.w.b = b
	zw := c.NewWriter(&s.w)
	_, err := zw.Write(recs)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	b, s.w.b = s.w.b, nil
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return b, nil
}

// millis is t in Unix milliseconds, 0 for the zero Time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	return (bits.Len64(uint64(v<<1^v>>63)|1) + 6) / 7
}

// nullBytesLen is the size of b as varint-length bytes, -1 for nil.
func nullBytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendNullBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

// appendWriter appends what is written to b, for a compressor's output.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
