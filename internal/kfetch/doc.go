// Package kfetch reads one Kafka partition with read_committed semantics
// through kafka-go's protocol layer.
//
// kafka-go's Conn.ReadBatchWith (and its Reader) drop two things a
// transactional topic needs: a record batch's control flag and the fetch
// response's list of aborted transactions. Commit and abort markers then
// arrive as ordinary records, and the records of an aborted transaction as
// if committed; asking for ReadCommitted only moves the upper bound to the
// last stable offset (segmentio/kafka-go#1332). The protocol package keeps
// both — protocol.ControlBatch and fetch.ResponsePartition.AbortedTransactions
// — so a Fetcher sends its own fetch.Request through a kafka.RoundTripper
// (which routes it to the partition's leader) and filters the answer as the
// Java consumer and franz-go do:
//
//   - control batches are skipped, their offsets consumed;
//   - a transactional batch of producer P starting at or after the first
//     offset of one of P's aborted transactions is dropped, until P's ABORT
//     marker closes that transaction;
//   - records below the requested offset (the head of the batch that holds
//     it) are skipped.
//
// Compressed batches (gzip, snappy, lz4, zstd) decode without anything to
// import here: kafka-go's protocol package links all four codecs through
// its compress package.
//
// # What kafka-go's protocol layer does not expose
//
// readFromVersion2 (protocol/record_v2.go) reads and discards a v2 batch's
// maxTimestamp and lastOffsetDelta. Two consequences:
//
//   - LogAppendTime. On a topic with message.timestamp.type=LogAppendTime,
//     Apache Kafka stamps the append time into the batch's maxTimestamp and
//     sets attribute bit 3; it leaves firstTimestamp and the records'
//     timestamp deltas as the producer wrote them, and consumers are to take
//     maxTimestamp as every record's time. kafka-go computes a record's
//     time as firstTimestamp+delta, so through this path a LogAppendTime
//     record carries the producer's create time. The attribute bit does
//     survive (RecordBatch.Attributes keeps all 16 bits), so Record.LogAppendTime
//     tells the caller which times are the producer's clock and must not be
//     believed as append times. (kfake overwrites firstTimestamp too, so
//     against kfake the times happen to be append times.)
//   - Trailing offsets of a batch. A batch whose last records were removed
//     by compaction, or a retained empty batch, still spans up to its
//     lastOffsetDelta; without it NextOffset can only move past the last
//     record seen and the start of each following batch. Only the last batch
//     of a response is affected: a fetch at NextOffset returns that batch
//     again (its records, now below the offset, are skipped) until a record
//     is appended after it. Non-compacted topics never have such batches.
package kfetch
