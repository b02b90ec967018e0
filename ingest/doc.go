// Package ingest consumes heartbeats from the signals topic and writes each
// device's deadline to its shard.
//
// Ingest joins the consumer group with kafka-go's ConsumerGroup and, per
// generation, runs one reader per assigned partition, one batcher and one
// watermark prober. The batcher decodes a batch (invalid messages go to the
// dead-letter topic), keeps the newest heartbeat per device, groups the
// writes by shard under one layout snapshot and sends them in one pipelined
// round trip. Only after Redis (and the dead-letter topic) acknowledged a
// batch does it commit the batch's offsets and raise the partitions'
// watermarks: a Redis outage stalls ingest without losing or skipping a
// message, and the scanners never fire a deadline a pending message could
// still postpone.
//
// The prober asks Kafka for the high-water marks of the owned partitions
// every ingest.probe_interval; a partition whose every record up to the
// mark is written gets the probe's send time as its watermark, so an idle
// partition does not hold firing back.
package ingest
