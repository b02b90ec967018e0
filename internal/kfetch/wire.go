package kfetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// wire reads Kafka's big-endian primitives off an answer; the first short
// read sets err and every later read returns zero.
type wire struct {
	b   []byte
	err error
}

var errShort = errors.New("answer cut short")

func (w *wire) take(n int) []byte {
	if w.err != nil || n < 0 || n > len(w.b) {
		w.err = errShort
		return nil
	}
	b := w.b[:n:n]
	w.b = w.b[n:]
	return b
}

func (w *wire) i16() int16 {
	if b := w.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (w *wire) i32() int32 {
	if b := w.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (w *wire) i64() int64 {
	if b := w.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// str is a STRING (int16 length); it aliases the answer.
func (w *wire) str() []byte { return w.take(int(w.i16())) }

// array is an ARRAY's (or NULLABLE_BYTES') int32 length; -1 (null) is 0.
func (w *wire) array() int {
	n := int(w.i32())
	if n < -1 || n > len(w.b) { // every element takes at least a byte
		w.err = errShort
		return 0
	}
	return max(n, 0)
}

// varint is a zig-zag varint (int or long).
func (w *wire) varint() int64 {
	if w.err != nil {
		return 0
	}
	v, n := binary.Varint(w.b)
	if n <= 0 {
		w.err = errShort
		return 0
	}
	w.b = w.b[n:]
	return v
}

// varBytes is a record's key or value (varint length, -1 for null).
func (w *wire) varBytes() []byte {
	n := w.varint()
	if n < 0 {
		return nil
	}
	if n == 0 {
		return empty
	}
	return w.take(int(n))
}

// errLeftOut is a partition's error when the answer does not mention it.
var errLeftOut = errors.New("the answer leaves the partition out")

// parseFetch reads the Fetch answer raw (v4–v11, non-flexible) to a
// request for parts of topic: each partition's offsets, aborted
// transactions and records go to its Part's Res, and its partition error,
// or the failure to decode its records, to its Part's Err (a partition
// error is not decoded further). An answer whose framing does not decode
// is an error of the whole.
func parseFetch(version int16, raw []byte, topic string, parts []Part) error {
	w := wire{b: raw}
	var throttle time.Duration
	if version >= 1 {
		throttle = time.Duration(w.i32()) * time.Millisecond
	}
	for i := range parts {
		parts[i].Res.Throttle = throttle
		parts[i].Err = errLeftOut
	}
	if version >= 7 {
		if code := w.i16(); code != 0 {
			for i := range parts {
				parts[i].Err = kafka.Error(code)
			}
			return w.err
		}
		w.i32() // session ID
	}
	at := 0 // where the next partition is looked for first: brokers answer in the request's order
	for range w.array() {
		name := w.str()
		for range w.array() {
			p := w.i32()
			code := w.i16()
			hwm, lso, logStart := w.i64(), w.i64(), int64(-1)
			if version >= 5 {
				logStart = w.i64()
			}
			var part *Part
			if string(name) == topic {
				if k := findPart(parts, at, p); k >= 0 && parts[k].Err == errLeftOut {
					part, at = &parts[k], k+1
				}
			}
			for range w.array() {
				pid, first := w.i64(), w.i64()
				if part != nil {
					part.Res.aborted.add(pid, first)
				}
			}
			if version >= 11 {
				w.i32() // preferred read replica
			}
			records := w.take(w.array())
			if w.err != nil {
				return w.err
			}
			if part != nil {
				part.Err = part.take(code, hwm, lso, logStart, records)
			}
		}
	}
	return w.err
}

// findPart returns the index of partition p in parts, looking at index at
// first; -1 if it is not there.
func findPart(parts []Part, at int, p int32) int {
	if at < len(parts) && parts[at].Partition == int(p) {
		return at
	}
	for k := range parts {
		if parts[k].Partition == int(p) {
			return k
		}
	}
	return -1
}

// take fills the Part's Res from its section of the answer and returns its
// error: the broker's partition error, or records that do not decode (Res
// then empty).
func (pt *Part) take(code int16, hwm, lso, logStart int64, records []byte) error {
	r := pt.Res
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = hwm, lso, logStart
	if code != 0 {
		return kafka.Error(code)
	}
	r.aborted.sort()
	if err := r.parseBatches(records, pt.Offset); err != nil {
		r.reset(pt.Offset)
		return err
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// v2 record batch header: offsets of the fields after baseOffset (int64)
// and batchLength (int32), which batchHeader counts.
const (
	batchHeader      = 8 + 4
	offMagic         = 4  // after partitionLeaderEpoch (int32)
	offCRC           = 5  // uint32 over attributes to the end
	offAttributes    = 9  // int16
	offLastOffsetDel = 11 // int32
	offFirstTS       = 15 // int64
	offMaxTS         = 23 // int64
	offProducerID    = 31 // int64
	offRecordCount   = 45 // int32, after producerEpoch and baseSequence
	offRecords       = 49
)

// parseBatches reads the partition's record batches. A batch cut off at
// the end of the answer (the broker stops at MaxBytes mid-batch) is left
// for the next fetch; a whole batch advances NextOffset to its last offset
// + 1, records compacted away from its end included.
func (r *Result) parseBatches(b []byte, offset int64) error {
	// One allocation for the answer's records, not a doubling per power of
	// two: a backlog's answers hold tens of thousands of records, and a
	// Result grown record by record moved and zeroed them over and over.
	// Records is empty here (reset), so a larger array is made afresh, at
	// least twice the old one: slices.Grow would copy the old array's
	// whole capacity into it, and grow again at the next slightly larger
	// answer.
	if n := recordCount(b); cap(r.Records)-len(r.Records) < n {
		grown := make([]Record, len(r.Records), max(len(r.Records)+n, 2*cap(r.Records)))
		copy(grown, r.Records)
		r.Records = grown
	}
	whole := 0
	for len(b) >= batchHeader {
		base := int64(binary.BigEndian.Uint64(b))
		n := int(int32(binary.BigEndian.Uint32(b[8:])))
		if n < offRecords || n > len(b)-batchHeader {
			break // partial
		}
		batch := b[batchHeader : batchHeader+n]
		b = b[batchHeader+n:]
		if magic := batch[offMagic]; magic != 2 {
			return fmt.Errorf("batch at offset %d: message format v%d, want v2 (Kafka 0.11+)", base, magic)
		}
		if crc := binary.BigEndian.Uint32(batch[offCRC:]); crc32.Checksum(batch[offAttributes:], castagnoli) != crc {
			return fmt.Errorf("batch at offset %d: CRC mismatch", base)
		}
		if err := r.parseBatch(base, batch, offset); err != nil {
			return fmt.Errorf("batch at offset %d: %w", base, err)
		}
		whole++
	}
	if whole == 0 && len(b) > 0 {
		// Only a broker below 0.10.1 (KIP-74) cuts the first batch: the
		// partition would not move.
		return fmt.Errorf("the first batch at %d is cut off at %d bytes", r.NextOffset, len(b))
	}
	return nil
}

// recordCount sums the record counts of the whole batches in b, from
// their headers, each at most its batch's length.
func recordCount(b []byte) int {
	total := 0
	for len(b) >= batchHeader {
		n := int(int32(binary.BigEndian.Uint32(b[8:])))
		if n < offRecords || n > len(b)-batchHeader {
			break
		}
		// At most one record per byte: a count is the broker's word, and
		// an absurd one must not allocate (append grows past a low one).
		total += min(max(0, int(int32(binary.BigEndian.Uint32(b[batchHeader+offRecordCount:])))), n)
		b = b[batchHeader+n:]
	}
	return total
}

func (r *Result) parseBatch(base int64, batch []byte, offset int64) error {
	attrs := binary.BigEndian.Uint16(batch[offAttributes:])
	last := base + int64(int32(binary.BigEndian.Uint32(batch[offLastOffsetDel:])))
	firstTS := int64(binary.BigEndian.Uint64(batch[offFirstTS:]))
	maxTS := int64(binary.BigEndian.Uint64(batch[offMaxTS:]))
	pid := int64(binary.BigEndian.Uint64(batch[offProducerID:]))
	count := int(int32(binary.BigEndian.Uint32(batch[offRecordCount:])))
	r.NextOffset = max(r.NextOffset, last+1)
	txn := attrs&attrTransactional != 0
	if txn && attrs&attrControl == 0 && r.aborted.aborted(pid, base) {
		return nil // not even decompressed
	}
	records, err := r.inflate(attrs, batch[offRecords:])
	if err != nil {
		return err
	}
	w := wire{b: records}
	for range count {
		length := w.varint()
		rec := wire{b: w.take(int(length))}
		rec.take(1) // attributes
		tsDelta, offDelta := rec.varint(), rec.varint()
		key, value := rec.varBytes(), rec.varBytes()
		headers := rec.b // the rest of the record: its header section, read by whoever needs it
		if err := cmpErr(w.err, rec.err); err != nil {
			return fmt.Errorf("record %d of %d: %w", len(r.Records), count, err)
		}
		off := base + offDelta
		if attrs&attrControl != 0 {
			// One marker per control batch; Java and franz-go act on the first.
			if txn && len(key) >= 4 && binary.BigEndian.Uint16(key[2:]) == controlAbort {
				r.aborted.closeAt(pid, off)
			}
			return nil
		}
		if off < offset {
			continue
		}
		ts := firstTS + tsDelta
		if attrs&attrLogAppendTime != 0 {
			ts = maxTS
		}
		r.Records = append(r.Records, Record{
			Offset: off, Time: time.UnixMilli(ts), Key: key, Value: value, Headers: headers,
			LogAppendTime: attrs&attrLogAppendTime != 0,
		})
	}
	return nil
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// maxInflated bounds one batch's decompressed records (brokers cap the
// compressed size only).
const maxInflated = 256 << 20

// inflate returns a batch's records, decompressed into r.inflated when the
// batch is compressed. When r.inflated is full it moves to a new, larger
// buffer: records already taken keep pointing into the old one.
func (r *Result) inflate(attrs uint16, src []byte) ([]byte, error) {
	c := compress.Compression(attrs & attrCompression)
	if c == compress.None {
		return src, nil
	}
	codec := c.Codec()
	if codec == nil {
		return nil, fmt.Errorf("unknown compression %d", c)
	}
	r.src.Reset(src)
	zr := codec.NewReader(&r.src)
	defer zr.Close()
	start := len(r.inflated)
	for {
		if len(r.inflated) == cap(r.inflated) {
			if len(r.inflated)-start >= maxInflated {
				return nil, fmt.Errorf("%v: decompresses to more than %d bytes", c, maxInflated)
			}
			grown := make([]byte, len(r.inflated)-start, max(2*cap(r.inflated), 4*len(src), minChunk))
			copy(grown, r.inflated[start:])
			r.inflated, start = grown, 0
		}
		n, err := zr.Read(r.inflated[len(r.inflated):cap(r.inflated)])
		r.inflated = r.inflated[:len(r.inflated)+n]
		if errors.Is(err, io.EOF) {
			return r.inflated[start:len(r.inflated):len(r.inflated)], nil
		}
		if err != nil {
			return nil, fmt.Errorf("%v: %w", c, err)
		}
	}
}
