// Package namer names storms (package storm): every instance counts, in
// its Tally, the timeouts and recoveries its dispatch published and moves
// the counts to Redis; the Namer of the instance that owns shard 0's lease
// declares a storm when timeouts surge or a hold lasts, publishes one
// storm_started and one storm_ended event, and ends it once things calm
// down.
//
// Files: tally.go (the counts and the storm_id of this process's
// timeouts), namer.go (the Namer's loop).
package namer
