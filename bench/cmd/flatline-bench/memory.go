package main

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// MemoryResult is scenario 4: Redis bytes per tracked device, flatline's
// store against a bare ZSET of the same ids and scores, each on a fresh
// redis-server (INFO memory used_memory after − before).
type MemoryResult struct {
	Devices            int     `json:"devices"`
	FlatlineBytes      int64   `json:"flatline_bytes"`
	BareBytes          int64   `json:"bare_zset_bytes"`
	FlatlinePerDevice  float64 `json:"flatline_bytes_per_device"`
	BarePerDevice      float64 `json:"bare_bytes_per_device"`
	Ratio              float64 `json:"ratio"`
	StoreWritesPerSec  float64 `json:"store_write_members_per_second"`
	IDExample          string  `json:"id_example"`
	FlatlineLoadSecond float64 `json:"flatline_load_seconds"`
}

func runMemory(ctx context.Context, o *options) (*MemoryResult, error) {
	res := &MemoryResult{Devices: o.memDevices}
	ids := sample.DeviceIDs("device-", o.memDevices)
	res.IDExample = ids[len(ids)-1]
	// Deadlines as a live fleet has them: spread over the next minute.
	r := rand.New(rand.NewPCG(7, 7))
	now := time.Now().UnixMilli()
	deadlines := make([]int64, len(ids))
	for k := range deadlines {
		deadlines[k] = now + 1000 + r.Int64N(60_000)
	}

	// flatline: shard.Store.Write, the ingest path, into 16 shards.
	rp, err := startRedis()
	if err != nil {
		return nil, err
	}
	st, err := rp.Store(ctx)
	if err != nil {
		rp.Close()
		return nil, err
	}
	before, err := rp.UsedMemory(ctx)
	if err != nil {
		rp.Close()
		return nil, err
	}
	status("memory: %d devices through Store.Write", o.memDevices)
	load, err := loadDeadlines(ctx, st, o.shards, ids, func(k int) int64 { return deadlines[k] })
	if err != nil {
		rp.Close()
		return nil, err
	}
	after, err := rp.UsedMemory(ctx)
	rp.Close()
	if err != nil {
		return nil, err
	}
	res.FlatlineBytes = after - before
	res.FlatlineLoadSecond = load.Seconds()
	res.StoreWritesPerSec = float64(len(ids)) / load.Seconds()

	// Bare: one ZSET, the same members and scores, plain ZADD.
	rp, err = startRedis()
	if err != nil {
		return nil, err
	}
	defer rp.Close()
	before, err = rp.UsedMemory(ctx)
	if err != nil {
		return nil, err
	}
	status("memory: the same ids in one bare ZSET")
	const chunk = 1024
	for from := 0; from < len(ids); from += chunk * 16 {
		_, err := rp.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for c := from; c < min(from+chunk*16, len(ids)); c += chunk {
				args := []any{"ZADD", "bare"}
				for k := c; k < min(c+chunk, len(ids)); k++ {
					args = append(args, float64(deadlines[k]), ids[k])
				}
				p.Do(ctx, args...)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	after, err = rp.UsedMemory(ctx)
	if err != nil {
		return nil, err
	}
	res.BareBytes = after - before
	res.FlatlinePerDevice = float64(res.FlatlineBytes) / float64(len(ids))
	res.BarePerDevice = float64(res.BareBytes) / float64(len(ids))
	if res.BareBytes > 0 {
		res.Ratio = float64(res.FlatlineBytes) / float64(res.BareBytes)
	}
	return res, nil
}
