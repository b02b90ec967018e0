package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// DownCountChunk is how many down entries one call of down_count.lua reads
// by default: it bounds how long one call holds Redis (about a millisecond
// per few thousand entries).
const DownCountChunk = 5000

// DownSince returns, per shard 0..n-1, how many down entries have a
// deadline at or after sinceMs (Unix ms) as the score carries it (a padded
// deadline counts with its pad), in one round trip of ZCOUNT: O(log n) in
// Redis per shard, whatever the size of the down sets. It sends nothing that
// changes Redis, so the read commands can use it.
func (s *Store) DownSince(ctx context.Context, n int, sinceMs int64) ([]int64, error) {
	min := strconv.FormatFloat(Score(sinceMs, 0), 'f', -1, 64)
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.ZCount(ctx, s.keys.Down(i), min, "+inf")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count down sets: %w", err)
	}
	out := make([]int64, n)
	for i, c := range cmds {
		out[i] = c.(*redis.IntCmd).Val()
	}
	return out, nil
}

// DownByClass is what CountDownByClass found.
type DownByClass struct {
	// Counts maps class id (0 = none) to down entries.
	Counts map[int]int64
	// RoundTrips is how many pipelines it sent.
	RoundTrips int
}

// CountDownByClass counts the down entries of shards 0..n-1 that DownSince
// counts, by class id. The class id is in the low bits of the score, which
// no score range selects, so every entry is looked at: in Redis, by
// down_count.lua, chunk entries per call at most (DownCountChunk when 0),
// in rounds of one pipeline of one call per shard not done yet. Only the
// counts travel back. The script is loaded by Connect (serve); the read
// commands, which load no script, use DownSince.
func (s *Store) CountDownByClass(ctx context.Context, n int, sinceMs int64, chunk int) (DownByClass, error) {
	if chunk <= 0 {
		chunk = DownCountChunk
	}
	out := DownByClass{Counts: make(map[int]int64)}
	start := make([]string, n)
	pending := make([]int, n)
	for i := range n {
		start[i] = strconv.FormatFloat(Score(sinceMs, 0), 'f', -1, 64)
		pending[i] = i
	}
	metaSpan, classSpan := int64(1)<<metaBits, int64(1)<<classBits
	for len(pending) > 0 {
		cmds, err := s.pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range pending {
				scriptDownCnt.EvalSha(ctx, p, []string{s.keys.Down(i)}, start[i], chunk, metaSpan, classSpan)
			}
			return nil
		})
		out.RoundTrips++
		if err != nil {
			return DownByClass{}, fmt.Errorf("count down sets by class: %w", err)
		}
		next := pending[:0]
		for k, i := range pending {
			vals, err := cmds[k].(*redis.Cmd).Slice()
			if err != nil || len(vals) == 0 || len(vals)%2 == 0 {
				return DownByClass{}, fmt.Errorf("count down set of shard %d: answer %v: %v", i, vals, err)
			}
			for j := 1; j+1 < len(vals); j += 2 {
				id, _ := vals[j].(int64)
				c, _ := vals[j+1].(int64)
				out.Counts[int(id)] += c
			}
			if more, _ := vals[0].(string); more != "" {
				start[i] = more
				next = append(next, i)
			}
		}
		pending = next
	}
	return out, nil
}
