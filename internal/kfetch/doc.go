// Package kfetch reads Kafka partitions with read_committed semantics: one
// partition per request (Fetcher, Conn.Fetch), or every partition of a
// topic one broker leads in one request (Conn.FetchMany, or its two halves
// SendMany and ReceiveMany, so that the next request can go out while the
// last answer is still being handed on), each decoded into its own Result.
//
// kafka-go's Conn.ReadBatchWith (and its Reader) drop two things a
// transactional topic needs: a record batch's control flag and the fetch
// answer's list of aborted transactions. Commit and abort markers then
// arrive as ordinary records, and the records of an aborted transaction as
// if committed; asking for ReadCommitted only moves the upper bound to the
// last stable offset (segmentio/kafka-go#1332). Both fetchers here filter
// the answer as the Java consumer and franz-go do:
//
//   - control batches are skipped, their offsets consumed;
//   - a transactional batch of producer P starting at or after the first
//     offset of one of P's aborted transactions is dropped, until P's ABORT
//     marker closes that transaction (abort.go);
//   - records below the requested offset (the head of the batch that holds
//     it) are skipped.
//
// # Two paths
//
// Fetcher sends a protocol/fetch.Request through a kafka.RoundTripper
// (kafka.Transport routes it to the leader from its cached metadata) and
// filters kafka-go's decoding of the answer, which keeps the control flag
// (protocol.ControlBatch) and the aborted-transaction list. That decoding
// costs and loses things (protocol/record_v2.go, readFromVersion2):
//
//   - Heap. The whole answer is decoded before RoundTrip returns, and every
//     batch gets its own 64 KiB pages, held until its records are read: an
//     answer of n batches holds about n × 64 KiB (2000 one-record batches,
//     350 KB on the wire, hold 126 MB). Config.MaxBytes is what bounds it.
//   - maxTimestamp is read and discarded. On a topic with
//     message.timestamp.type=LogAppendTime, Apache Kafka stamps the append
//     time into the batch's maxTimestamp and sets attribute bit 3, leaving
//     firstTimestamp and the records' deltas as the producer wrote them;
//     consumers are to take maxTimestamp as every record's time. Through
//     kafka-go a record's time is firstTimestamp+delta: the producer's
//     clock. The attribute bit survives (RecordBatch.Attributes keeps all
//     16 bits), so Record.LogAppendTime at least says so.
//   - lastOffsetDelta is read and discarded, so NextOffset cannot go past
//     offsets that compaction removed from the end of the answer's last
//     batch; a fetch there returns that batch again (its records, below the
//     offset, skipped) until a record is appended after it. Only compacted
//     topics have such batches.
//   - The transport refreshes metadata on a timer (kafka.Transport's
//     MetadataTTL, 6 s by default, at a random point within it), never on
//     NotLeaderForPartition: until then fetches go to the old leader.
//
// Conn dials a broker itself (TLS and SASL from a kafka.Dialer; DialLeader
// finds a partition's leader, Leaders every partition's), writes the same
// fetch.Request with kafka-go's encoder — for one partition or for
// several — and decodes the answer from the bytes read off the socket
// (wire.go), each partition's section into its own Result, a partition's
// error (NotLeaderForPartition, OffsetOutOfRange, …) its own: keys and
// values alias the answer (no copy), a LogAppendTime record gets the
// append time, NextOffset uses lastOffsetDelta, the heap held is the
// answer plus its decompressed batches, and a moved leader is found by
// dialing again (DialLeader asks the brokers afresh). It handles the v2
// batch format only (Kafka 0.11+; Kafka 4 no longer serves older formats)
// and Fetch v4–v11.
//
// Compressed batches (gzip, snappy, lz4, zstd) decode on both paths without
// anything to import here: kafka-go's compress package links all four
// codecs.
package kfetch
