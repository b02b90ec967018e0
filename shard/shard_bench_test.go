package shard_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// The hot path of ingest per heartbeat: route (Hash, Of), encode (Score),
// add to the batch; per batch: one Store.Write. Benchmarks are
// benchstat-friendly (stable names, -count N):
//
//	go test -run '^$' -bench . -benchmem -count 6 ./shard | tee new.txt
//	benchstat old.txt new.txt

// benchIDs are n distinct device ids shaped like a fleet's.
func benchIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("device-%07d", i)
	}
	return ids
}

func BenchmarkHash(b *testing.B) {
	for _, id := range []string{"device-0000042", "0b6c2f1e-7d8a-4f3c-9e21-5a4d3c2b1a09"} {
		b.Run(fmt.Sprintf("len=%d", len(id)), func(b *testing.B) {
			b.SetBytes(int64(len(id)))
			var sink uint64
			for b.Loop() {
				sink += shard.Hash(id)
			}
			_ = sink
		})
	}
}

// BenchmarkRoute is Hash + Of over distinct ids, as ingest routes a batch.
func BenchmarkRoute(b *testing.B) {
	ids := benchIDs(4096)
	sink := 0
	i := 0
	for b.Loop() {
		sink += shard.Of(shard.Hash(ids[i&4095]), 16)
		i++
	}
	_ = sink
}

func BenchmarkScore(b *testing.B) {
	const deadline = shard.Epoch + 86_400_000*700
	m := shard.NewMeta(3, shard.FlagPadded)
	b.Run("encode", func(b *testing.B) {
		var sink float64
		i := int64(0)
		for b.Loop() {
			sink += shard.Score(deadline+i, m)
			i++
		}
		_ = sink
	})
	b.Run("decode", func(b *testing.B) {
		s := shard.Score(deadline, m)
		var sink int64
		for b.Loop() {
			d, meta := shard.DecodeScore(s)
			sink += d + int64(meta)
		}
		_ = sink
	})
}

// BenchmarkBatch builds one ingest batch: 4096 heartbeats of distinct
// devices routed into 16 shards (Reset keeps the buffers, as ingest reuses
// one Batch).
func BenchmarkBatch(b *testing.B) {
	ids := benchIDs(4096)
	const deadline = shard.Epoch + 86_400_000*700
	var batch shard.Batch
	for b.Loop() {
		batch.Reset(16)
		for k, id := range ids {
			batch.Add(shard.Of(shard.Hash(id), 16), id, shard.Score(deadline+int64(k), 0), 0)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ids)), "ns/heartbeat")
}

// BenchmarkStoreWrite is one Store.Write of a 4096-heartbeat batch (16
// shards, one pipelined round trip of plain ZADD GT commands and the look
// at the down sets) against a private redis-server: resets of devices
// already tracked, as in steady state.
func BenchmarkStoreWrite(b *testing.B) {
	st, _ := testenv.Store(b)
	ctx := context.Background()
	for _, size := range []int{256, 4096} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ids := benchIDs(65536)
			var batch shard.Batch
			deadline := shard.Epoch + 86_400_000*700
			off := 0
			for b.Loop() {
				batch.Reset(16)
				for k := 0; k < size; k++ {
					id := ids[(off+k)&65535]
					batch.Add(shard.Of(shard.Hash(id), 16), id, shard.Score(deadline, 0), 0)
				}
				off += size
				deadline++ // every write moves deadlines later
				if _, err := st.Write(ctx, &batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "heartbeats/s")
		})
	}
}
