package kfetch

import (
	"bytes"
	"time"
)

// Record is one record of a committed transaction or of a
// non-transactional producer.
type Record struct {
	Offset int64
	// Time is the record's timestamp: the batch's first timestamp plus the
	// record's delta, except that Conn takes a LogAppendTime batch's max
	// timestamp, the broker's append time, as Kafka's consumers do.
	// Fetcher cannot (kafka-go discards it; see the package comment).
	Time time.Time
	// Key and Value are nil when null. They alias the Result's buffers and
	// hold until the next fetch into the same Result.
	Key, Value []byte
	// Headers is the record's header section as the record format (v2)
	// writes it: a zigzag varint count, then each header's key and value as
	// zigzag-varint-length bytes (-1: null). It aliases the Result's
	// buffers like Key and Value. A record without headers has a count of 0
	// (Conn) or nil (Fetcher).
	Headers []byte
	// LogAppendTime is set when the record's batch carries the
	// LogAppendTime timestamp type (attribute bit 3): the topic has
	// message.timestamp.type=LogAppendTime.
	LogAppendTime bool
}

// Result is the answer to one fetch. A caller that fetches in a loop reuses
// one Result, so that its record slice and buffers stop allocating once
// they have grown to a fetch's size.
type Result struct {
	// Records are the records at or past the fetched offset, in offset
	// order: no control record, no record of an aborted transaction.
	Records []Record
	// NextOffset is where the next fetch starts: past every record, control
	// record and aborted record read, and past offsets compaction removed.
	// It equals the fetched offset when nothing was read.
	NextOffset int64
	// HighWatermark, LastStableOffset and LogStartOffset are the broker's
	// view of the partition when it answered; -1 when it did not say
	// (Apache Kafka leaves them out of an error answer; for
	// OffsetOutOfRange, the fetch asks for LogStartOffset and
	// LastStableOffset). Under read_committed the broker returns nothing at
	// or past LastStableOffset, so a reader that is caught up has
	// NextOffset == LastStableOffset, which is below HighWatermark while a
	// transaction is open.
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Throttle is how long the broker asks the client to wait before its
	// next request (quotas).
	Throttle time.Duration

	aborted abortedTxns

	// Fetcher: keys and values copied out of kafka-go's pooled pages.
	buf    []byte
	ctlKey [4]byte // a control record's key, read without allocating

	// Conn: the answer as read from the socket, which uncompressed keys
	// and values alias, and the decompressed batches, which the others do.
	raw      []byte
	inflated []byte
	src      bytes.Reader
}

// Batch attributes (v2; bit 3 also in v1 message sets).
const (
	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// controlAbort is the type, in a control record's key (int16 version, int16
// type), of an ABORT marker; COMMIT is 1.
const controlAbort = 0

func (r *Result) reset(offset int64) {
	r.Records = r.Records[:0]
	r.buf = r.buf[:0]
	r.inflated = r.inflated[:0]
	r.NextOffset = offset
	r.HighWatermark, r.LastStableOffset, r.LogStartOffset = -1, -1, -1
	r.Throttle = 0
	r.aborted.clear()
}

// empty is a zero-length, non-nil key or value: not null.
var empty = []byte{}

// minChunk is the smallest buffer a Result allocates for keys and values.
const minChunk = 4 << 10
