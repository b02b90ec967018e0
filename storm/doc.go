// Package storm tells a dead pipe from a dead fleet.
//
// When the pipe upstream of the signals topic breaks (an MQTT bridge or a
// Kafka Connect task restarting, a producer service being deployed), every
// device behind it looks silent at once. flatline holds firing instead of
// timing them all out:
//
//   - ingest learns each signals partition's usual traffic (ingest/stall.go)
//     and marks a busy partition whose high-water mark stands still for
//     stall_after as stalled, in Redis (shard.Store.MarkStalled), so every
//     instance sees it and a new owner of the partition keeps it;
//   - a stalled partition's watermark stays at its last record's time +
//     stall_after, and the whole hold — from the first stall until records
//     flow again on every stalled partition — caps the firing gate
//     (scanner.Gate), so no deadline after the hold's start fires;
//   - when the hold ends, a device whose deadline fell inside it is given
//     its own timeout again from the hold's end (scanner/reenter.go): the
//     devices on their way back never fire, the dead ones fire at most their
//     timeout after the pipe returned;
//   - a hold is bounded by max_hold, and `flatline storm release` ends
//     every hold at once;
//   - the Namer (package storm/namer), run by one instance at a time,
//     declares a storm when timeouts surge or a hold begins and ends it when
//     they calm down, with one storm_started and one storm_ended event; the
//     timeouts of a storm carry its storm_id.
//
// This package holds what every part of the guard shares: its Config and
// the storm ids (config.go). It imports no stage, so ingest, which runs the
// stall detection, reads its configuration from here without depending on
// the parts that run.
package storm
