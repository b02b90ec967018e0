package shard

import "github.com/cespare/xxhash/v2"

// MaxShards is the largest shard count a layout may have.
const MaxShards = 4096

// Hash is the routing hash of a device id.
func Hash(id string) uint64 { return xxhash.Sum64String(id) }

// Of returns the shard of a device with routing hash h under count shards.
// count must be a power of two.
func Of(h uint64, count int) int { return int(h & uint64(count-1)) }

// ValidCount reports whether n is a usable shard count: a power of two in
// [1, MaxShards].
func ValidCount(n int) bool { return n >= 1 && n <= MaxShards && n&(n-1) == 0 }
