// Package scanner finds due devices and hands them to dispatch.
//
// One scanner runs per shard this instance owns (Reactor style: it only
// finds due members and hands them on, it never runs business logic); its
// passes run on a few long-lived pass runners, or a goroutine of their own
// when every runner is busy. A pass reads the shard's earliest members in one round trip, hands
// every full batch of scanner.batch_size due members to dispatch, keeps
// draining while batches come back full, and learns the shard's next deadline
// from the same read. A pass runs when the shard is woken: by a timer at
// its next deadline; by a write that brings that deadline closer than the
// poll's reach, on whichever instance wrote it (Wakes); by the watermark
// releasing a held deadline; by a completed group. So timeouts are not late
// by a polling period. A gocron job, the poll, reads the next
// deadline of every shard each scanner.interval, a slice of the shards per
// round trip spread over the interval, a safety net: an idle shard costs
// one command per interval, and no goroutine.
//
// Firing is gated by the watermark (see Gate): only deadlines at or before
// min(now, watermark) − scanner.grace fire, so a lagging or dead ingest stalls
// firing instead of producing false timeouts. A member leaves its shard only
// after Kafka acknowledged its event, and only if its score is unchanged, so
// a reset racing a timeout is never lost.
//
// A file per goroutine kind: scanner.go holds the Scanner and its lifecycle,
// pass.go a shard's pass, runners.go the pass runners, poll.go the poll, fire.go the
// goroutine that publishes one group and removes it, reenter.go the
// deadlines a storm hold kept (given a new one instead of firing),
// migrate.go the two-shard rule of a migrating layout, gate.go the
// watermark poller, wakes.go the wake-ups between instances and lease.go
// the leaser; config.go is the scanner section of the configuration.
package scanner
