// Package dispatch turns due members into events and publishes them; it never
// touches Redis.
//
// A scanner hands dispatch the members it found due (device id and score);
// dispatch decodes each score (deadline, class id, override and padding
// flags), builds the timeout event (the README's "Messages"), and produces it to the
// timeouts topic keyed by device id, so murmur2 puts every event of a device
// on the partition Java clients expect. Timeouts returns only once Kafka has
// acknowledged every event (acks=all): the scanner removes a member from its
// shard after that, never before, so a crash between the two re-fires an
// event (at least once, deduplicated by event_id) but never loses one.
//
// One Publisher serves every scanner of the instance. Its producer (see
// producer.go) keeps at most one produce request per partition leader in
// flight; calls from different scanners that queue while a request is out
// share the next one, with every partition of that leader in it.
//
// Files: publisher.go (the Publisher: timeouts, recoveries, storm events),
// event.go (the events' JSON), producer.go (the produce requests),
// recordbatch.go (a partition's records encoded as the request carries
// them), tail.go (`flatline tail`: reading the timeouts topic back) and
// config.go (the dispatch section).
package dispatch
