// Package shard is flatline's Redis store: the sharded deadline sets, the
// layout, the watermarks, the leases, the live instances and the class
// registry.
//
// Every Redis key flatline uses is built in keys.go; every multi-step
// operation that must be atomic is a small Lua script under scripts/ loaded
// with go:embed. The hot path is not: a reset is a plain ZADD GT (see
// Store.Write for why that is safe). The store works with a go-redis
// UniversalClient, so the same code serves a standalone Redis and a Redis
// Cluster: each shard's keys share the hash tag {i}, and a script only ever
// touches keys of one shard.
//
// Store's methods sit in a file per concern: write.go (the hot path, with
// batch.go, the writes of one ingest batch by shard, and durable.go, the
// WAIT that confirms them), read.go, wake.go (how scanners learn of
// deadlines: the poll's read and the wake-ups writes send), fire.go
// (removing fired and stale members), downcount.go and downlist.go (the
// down sets counted and paged, for inspect), migrate.go (moving members
// between shards), storm.go (the storm guard's state in the watermarks
// hash), layout.go, watermarks.go, classes.go, leases.go and instances.go;
// store.go holds the type, its Options, the scripts and the pipeline
// helpers they share. score.go packs a deadline and its metadata into a
// score, route.go a device id into its shard.
//
// shard imports no other stage: ingest writes through it, scanner reads and
// acknowledges through it, rebalance owns the layout it stores, inspect
// reads it for operators and /metrics. No other package sends Redis a
// command about these keys: a new read is a new Store method here.
package shard
