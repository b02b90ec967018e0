package shard

import "strconv"

// Keys builds every Redis key flatline uses. All keys start with the
// configured prefix; per-shard keys carry the hash tag {i} so that a Redis
// Cluster keeps one shard's keys in one slot (scripts need that) and spreads
// the shards over its nodes.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for prefix (config redis.key_prefix).
func NewKeys(prefix string) Keys { return Keys{prefix: prefix} }

// Prefix is the configured key prefix.
func (k Keys) Prefix() string { return k.prefix }

func (k Keys) shardKey(i int, name string) string {
	return k.prefix + ":{" + strconv.Itoa(i) + "}:" + name
}

// Deadlines is shard i's ZSET: member = device id, score = encoded deadline
// (see Score). The hot path keeps exactly one member per device and nothing
// else.
func (k Keys) Deadlines(i int) string { return k.shardKey(i, "deadlines") }

// Down is shard i's ZSET of devices that timed out and may still recover:
// member = device id, score = the score the timeout fired at (see Score:
// the deadline, i.e. down_since, with the class id in its low bits).
// Pruned after dispatch.recovery_window.
func (k Keys) Down(i int) string { return k.shardKey(i, "down") }

// Overrides is shard i's HASH: device id -> timeout in ms, only for devices
// whose per-message timeout_ms differs from their class's timeout (the
// score's override flag says when to look here).
func (k Keys) Overrides(i int) string { return k.shardKey(i, "overrides") }

// sync is shard i's STRING counter that ingest increments right before a
// WAIT (redis.wait_replicas > 0; see Durability). An INCR always enters the
// replication stream, so the offset WAIT waits for then covers everything
// the master held, even when the batch's own writes changed nothing.
func (k Keys) sync(i int) string { return k.shardKey(i, "sync") }

// Lease is shard i's STRING holding the id of the instance that runs its
// scanner, with a PX expiry its owner renews.
func (k Keys) Lease(i int) string { return k.shardKey(i, "lease") }

// wakes is the pub/sub channel (a channel, not a key: nothing is stored)
// on which a write names the shards it gave a deadline their scanner may
// not see in time (see Options.Wakes); the instances scanning them pass at
// once. Redis Cluster forwards a PUBLISH to every node. An ACL user needs
// the channel too: &<prefix>:*.
func (k Keys) wakes() string { return k.prefix + ":wakes" }

// layout is the HASH {count, previous, epoch, since_ms} that rebalance owns.
func (k Keys) layout() string { return k.prefix + ":layout" }

// Watermarks is the HASH partition -> wm(p) in Unix ms, plus the field
// "partitions" holding the signals topic's partition count and the storm
// guard's stalls, holds and storm name (see storm.go).
func (k Keys) Watermarks() string { return k.prefix + ":watermarks" }

// traffic is the HASH partition -> "<last record ms>,<high-water mark>,
// <stall threshold ms>,<busy 0|1>": what the owner of each signals
// partition learned of its traffic, for the storm guard of its next owner.
// (The storm guard's shared state is in Watermarks: see storm.go.)
func (k Keys) traffic() string { return k.prefix + ":traffic" }

// firedCounts is the HASH of the storm guard's counts: "<unix second>" ->
// timeouts fired in that second, "t:<storm id>" and "r:<storm id>" -> the
// timeouts and recoveries of a storm. It expires an hour after its last
// write.
func (k Keys) firedCounts() string { return k.prefix + ":fired" }

// instances is the ZSET of live instances: member = instance id, score = the
// Unix ms of its last registration (see Store.RegisterInstance).
func (k Keys) instances() string { return k.prefix + ":instances" }

// Classes is the HASH registry of device classes: "n:<name>" -> id and
// "i:<id>" -> name, plus "next" -> the last id handed out. Ids are stable
// across restarts and config changes because they live in the score.
func (k Keys) Classes() string { return k.prefix + ":classes" }

// layoutSeen is the HASH instance id -> "<epoch>:<unix ms>": the layout
// epoch each instance last loaded and when. A migration finalizes only once
// every recently seen instance routes by its layout.
func (k Keys) layoutSeen() string { return k.prefix + ":layout_seen" }

// migration is the HASH of the running migration's progress, written by the
// sweeper: {epoch, misplaced, moved, total, updated_ms}.
func (k Keys) migration() string { return k.prefix + ":migration" }

// maintenanceKey builds the keys of maintenance windows. They share the
// hash tag {maintenance}, so the scripts that start and end a window change
// them together in one Redis Cluster slot.
func (k Keys) maintenanceKey(name string) string { return k.prefix + ":{maintenance}:" + name }

// windows is the HASH window id -> the window as JSON (WindowRecord, without
// its end): every window started and not yet pruned, open or ended.
func (k Keys) windows() string { return k.maintenanceKey("windows") }

// windowEnds is the ZSET of windows: member = window id, score = the Unix
// ms it ends (its until_ms, or when `maintenance end` ended it): open
// windows are the members scored after now.
func (k Keys) windowEnds() string { return k.maintenanceKey("ends") }

// windowsEnded is the HASH window id -> ended_at_ms of the windows ended
// early by `maintenance end`.
func (k Keys) windowsEnded() string { return k.maintenanceKey("ended") }

// windowsVersion is the STRING counter every start and end increments:
// instances poll it and reload the windows only when it moved.
func (k Keys) windowsVersion() string { return k.maintenanceKey("version") }

// Held is shard i's HASH of devices a maintenance window moved: device id
// -> "<stage>|<score>|<timeout ms>|<window id>" (see HeldRecord). A record
// counts only while the device's score is still the one it names: a
// heartbeat since then moved the device on, and the record is stale.
func (k Keys) Held(i int) string { return k.shardKey(i, "held") }

// Parents is shard i's HASH: ParentField(device id) -> the id of its
// gateway (SPEC §14), only for devices that named one; written by ingest
// when a device's parent changes, so a fleet without parents has no such
// key.
func (k Keys) Parents(i int) string { return k.shardKey(i, "parents") }

// gateways is shard i's SET of the devices of shard i some child named as
// its parent: their timeouts carry children_held.
func (k Keys) gateways(i int) string { return k.shardKey(i, "gateways") }

// holds is shard i's HASH: child id -> "<original score>:<held score>" for
// a child whose deadline passed while its parent was silent and which was
// re-entered at held score to wait for it. The entry stands while the
// child's score is the held score; a heartbeat that moved it on ends it.
func (k Keys) holds(i int) string { return k.shardKey(i, "holds") }

// awaited is shard i's ZSET of its devices that children wait for (held
// while their parent was silent): member = parent id, score = when a child
// last began to wait (Unix ms). A write looks its devices up in it (see
// Store.lookAwaited): a parent's first heartbeat gives its waiting
// children their own timeout from that heartbeat.
func (k Keys) awaited(i int) string { return k.shardKey(i, "awaited") }

// orphans is parent's HASH: child id -> the child's timeout in ms, for the
// children held or reported unreachable while parent was silent. It has
// the parent's id as its hash tag, not a shard's: a parent's children live
// in every shard, and it is read by parent (its HLEN is children_held; its
// children are given their own timeout again when it recovers), each
// command on this one key alone.
func (k Keys) orphans(parent string) string { return k.prefix + ":orphans:{" + parent + "}" }
