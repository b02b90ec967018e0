// Package ingest consumes heartbeats from the signals topic and writes each
// device's deadline to its shard.
//
// Ingest joins the consumer group with kafka-go's ConsumerGroup (group.go)
// and, per generation, runs these goroutines, each in its own file, in the
// order the records flow:
//
//   - the router (leaders.go) gives each assigned partition to the reader
//     of the broker that leads it, starting one reader per such broker,
//     and routes again, the leaders asked afresh, the partitions a reader
//     could not fetch (leader moved, broker gone), after their backoff;
//   - a reader per broker (fetch.go) sends one fetch at a time for every
//     partition of its broker, on its own connection, read_committed
//     (internal/kfetch: no transaction marker, no record of an aborted
//     transaction), and hands each partition's records on a chunk at a
//     time, the next fetch already sent when the answer came back whole;
//     an offset out of range moves by kafka.start_offset;
//   - the batcher (batch.go) gathers chunks into batches and hands each to
//     a processor (process.go), which prepares it (prepare.go): a goroutine
//     per batch decodes the records (package decode; invalid ones are kept
//     for the dead-letter topic, deadletter.go) and keeps the newest
//     heartbeat per device, several
//     batches side by side; then, one batch after the other in the
//     batcher's order, its sequencer drops the writes
//     ingest.coalesce_window says are already covered (coalesce.go) and
//     hands the batch on;
//   - the writer (write.go) sends each batch, grouped by shard under one
//     layout snapshot (route.go), in one pipelined round trip, with two
//     batches in Redis at once when their writes commute; after each write,
//     in batch order, its processor sends the dead letters and the
//     recovered events (process.go);
//   - each written batch's watermarks go to this process's scanners at
//     once (Options.Raised); the raise loop (watermark.go) raises them in
//     Redis, for the other instances, and the commit loop (commit.go)
//     commits the offsets, each taking the newest (pendingmax.go);
//   - the prober (probe.go) asks Kafka for the high-water marks of the owned
//     partitions every ingest.probe_interval, and beside them the topic's
//     partition count, which every watermark waits for; a partition whose
//     every record up to the mark is written gets the probe's send time as
//     its watermark, so an idle partition does not hold firing back (one whose
//     written offset lies past the mark, a committed offset the partition
//     does not hold, is not caught up: its reader is about to move);
//   - the stall guard (stall.go) watches each partition's high-water mark
//     from the probes: a busy partition whose mark stands still is
//     stalled, and its watermark is capped so that a silence storm holds
//     firing instead of paging per device (the README's "Silence storms").
//
// Only after Redis (and the dead-letter topic) acknowledged a batch are its
// offsets committed and the partitions' watermarks raised: a Redis outage
// stalls ingest without losing or skipping a message, and the scanners
// never fire a deadline a pending message could still postpone.
//
// That pause must not become the fleet's: firing waits for the lowest
// watermark, so an instance that keeps its partitions without writing them
// holds every instance's timeouts. Every Redis call of a generation goes
// through the instance's Redis link (release.go), which gives it a
// deadline and logs the failures; once Redis has answered none of them
// for ingest.release_after, Run leaves the consumer group, and the other
// instances read its partitions from the committed offsets. It joins
// again once Redis answers a ping, staying out a little longer each time
// it has to leave again soon after.
//
// A generation ends when the group rebalances or Run's context ends; kafka-go
// waits for all its goroutines before the next one starts. The writer waits
// for the writes it has in Redis, and the commit loop commits once more, so
// a clean stop leaves nothing to re-read.
package ingest
