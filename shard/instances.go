package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Heartbeat registers instance id as alive at nowMs and drops instances not
// heard from since staleBeforeMs. It returns the live instances, sorted.
func (s *Store) Heartbeat(ctx context.Context, id string, nowMs, staleBeforeMs int64) ([]string, error) {
	key := s.keys.Instances()
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(nowMs), Member: id})
		p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(staleBeforeMs, 10))
		p.ZRange(ctx, key, 0, -1)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register instance: %w", err)
	}
	live := cmds[2].(*redis.StringSliceCmd).Val()
	return live, nil
}

// Deregister removes instance id from the live set.
func (s *Store) Deregister(ctx context.Context, id string) error {
	return s.rdb.ZRem(ctx, s.keys.Instances(), id).Err()
}

// Instances returns the registered live instances.
func (s *Store) Instances(ctx context.Context) ([]string, error) {
	return s.rdb.ZRange(ctx, s.keys.Instances(), 0, -1).Result()
}
