package kfetch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
)

// Record is one record of a committed transaction or of a
// non-transactional producer.
type Record struct {
	Offset int64
	// Time is the record's timestamp as kafka-go decodes it: the batch's
	// first timestamp plus the record's delta. When LogAppendTime is set it
	// is not the broker's append time (see the package comment).
	Time time.Time
	// Key and Value are nil when null. They alias the Result's buffer and
	// hold until the next Fetch into the same Result.
	Key, Value []byte
	// Headers are kafka-go's own decoding of the record's headers: a slice
	// per record, aliasing nothing of the Result.
	Headers []kafka.Header
	// LogAppendTime is set when the record's batch carries the
	// LogAppendTime timestamp type (attribute bit 3): the topic has
	// message.timestamp.type=LogAppendTime.
	LogAppendTime bool
}

// Result is the answer to one fetch. A caller that fetches in a loop reuses
// one Result, so that its record slice and key/value buffer stop
// allocating once they have grown to a fetch's size.
type Result struct {
	// Records are the records at or past the fetched offset, in offset
	// order: no control record, no record of an aborted transaction.
	Records []Record
	// NextOffset is where the next fetch starts: past every record, control
	// record and aborted record read, and past the gaps compaction left
	// before a batch. It equals the fetched offset when nothing was read.
	NextOffset int64
	// HighWatermark, LastStableOffset and LogStartOffset are the broker's
	// view of the partition when it answered; -1 when it did not say
	// (Apache Kafka leaves them out of an error answer; for
	// OffsetOutOfRange, Fetch asks for LogStartOffset and LastStableOffset).
	// Under read_committed the broker returns nothing at or past
	// LastStableOffset, so a reader that is caught up has NextOffset ==
	// LastStableOffset, which is below HighWatermark while a transaction is
	// open.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Throttle is how long the broker asks the client to wait before its
	// next request (quotas).
	Throttle time.Duration

	buf     []byte // backs Records' keys and values
	aborted abortedTxns
	ctlKey  [4]byte // a control record's key, read without allocating
}

// logAppendTime is the v1/v2 attribute bit of the LogAppendTime timestamp
// type; kafka-go's protocol package names no constant for it.
const logAppendTime protocol.Attributes = 1 << 3

// controlAbort is the type, in a control record's key (int16 version, int16
// type), of an ABORT marker; COMMIT is 1.
const controlAbort = 0

func (r *Result) reset(offset int64) {
	clear(r.Records) // drop references to the last fetch's headers
	r.Records = r.Records[:0]
	r.buf = r.buf[:0]
	r.NextOffset = offset
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
	r.Throttle = 0
}

// decode fills r from the partition's answer to a fetch at offset.
func (r *Result) decode(p *fetch.ResponsePartition, offset int64) error {
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
	r.aborted.reset(p.AbortedTransactions)
	switch rs := p.RecordSet.Records.(type) {
	case nil:
		return nil
	case *protocol.RecordStream:
		for _, b := range rs.Records {
			if err := r.decodeBatch(b, offset); err != nil {
				return err
			}
		}
		return nil
	default:
		return r.decodeBatch(rs, offset)
	}
}

func (r *Result) decodeBatch(b protocol.RecordReader, offset int64) error {
	switch b := b.(type) {
	case *protocol.RecordBatch:
		// The offsets between the last record read and a batch's base
		// were compacted away.
		r.NextOffset = max(r.NextOffset, b.BaseOffset)
		drop := b.Attributes.Transactional() && r.aborted.aborted(b.ProducerID, b.BaseOffset)
		return r.readRecords(b.Records, offset, drop, b.Attributes&logAppendTime != 0)
	case *protocol.ControlBatch:
		r.NextOffset = max(r.NextOffset, b.BaseOffset)
		return r.readControl(b)
	case *protocol.MessageSet:
		// v0/v1 message sets predate transactions.
		return r.readRecords(b.Records, offset, false, b.Attributes&logAppendTime != 0)
	default:
		return r.readRecords(b, offset, false, false)
	}
}

// readRecords reads every record of a batch, keeping those at or past
// offset unless drop. It closes each key and value, which returns kafka-go's
// page buffers to their pool once a batch's last reference is gone.
func (r *Result) readRecords(rr protocol.RecordReader, offset int64, drop, lat bool) error {
	for {
		rec, err := rr.ReadRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read record after offset %d: %w", r.NextOffset-1, err)
		}
		if !drop && rec.Offset >= offset {
			key, err := r.copyOut(rec.Key)
			if err != nil {
				return fmt.Errorf("read key of offset %d: %w", rec.Offset, err)
			}
			value, err := r.copyOut(rec.Value)
			if err != nil {
				return fmt.Errorf("read value of offset %d: %w", rec.Offset, err)
			}
			r.Records = append(r.Records, Record{
				Offset: rec.Offset, Time: rec.Time, Key: key, Value: value,
				Headers: rec.Headers, LogAppendTime: lat,
			})
		}
		closeBytes(rec.Key)
		closeBytes(rec.Value)
		r.NextOffset = max(r.NextOffset, rec.Offset+1)
	}
}

// readControl consumes a control batch. Its first ABORT marker closes the
// producer's open aborted transaction; COMMIT markers (and any control type
// a later Kafka adds) need nothing. Like the Java consumer and franz-go, it
// acts on one marker per batch: a well-formed control batch holds one.
func (r *Result) readControl(b *protocol.ControlBatch) error {
	marked := false
	for {
		rec, err := b.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read control record after offset %d: %w", r.NextOffset-1, err)
		}
		if !marked && b.Attributes.Transactional() && rec.Key != nil && rec.Key.Len() >= len(r.ctlKey) {
			if _, err := io.ReadFull(rec.Key, r.ctlKey[:]); err != nil {
				return fmt.Errorf("read control record key of offset %d: %w", rec.Offset, err)
			}
			if binary.BigEndian.Uint16(r.ctlKey[2:]) == controlAbort {
				r.aborted.closeAt(b.ProducerID, rec.Offset)
				marked = true
			}
		}
		closeBytes(rec.Key)
		closeBytes(rec.Value)
		r.NextOffset = max(r.NextOffset, rec.Offset+1)
	}
}

// empty is a zero-length, non-nil key or value: not null.
var empty = []byte{}

// minChunk is the smallest buffer a Result allocates for keys and values.
const minChunk = 4 << 10

// copyOut copies a key or value out of kafka-go's pooled pages, which are
// reused once closed. When the buffer is full it starts a new one rather
// than growing it: records already handed out keep pointing into the old,
// and only the newest (the largest) is kept for the next fetch.
func (r *Result) copyOut(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	n := b.Len()
	if n == 0 {
		return empty, nil
	}
	if cap(r.buf)-len(r.buf) < n {
		r.buf = make([]byte, 0, max(2*cap(r.buf), n, minChunk))
	}
	start := len(r.buf)
	r.buf = r.buf[:start+n]
	dst := r.buf[start : start+n : start+n]
	if _, err := io.ReadFull(b, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

func closeBytes(b protocol.Bytes) {
	if b != nil {
		_ = b.Close()
	}
}
