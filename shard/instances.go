package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RegisterInstance registers instance id as alive at nowMs, or renews its
// registration, and drops instances not registered since staleBeforeMs. It
// returns the live instances, sorted. (Instances register, devices beat: an
// instance stays live while its leaser keeps registering it every round.)
func (s *Store) RegisterInstance(ctx context.Context, id string, nowMs, staleBeforeMs int64) ([]string, error) {
	key := s.keys.instances()
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

// DeregisterInstance removes instance id from the live set.
func (s *Store) DeregisterInstance(ctx context.Context, id string) error {
	return s.rdb.ZRem(ctx, s.keys.instances(), id).Err()
}

// Instances returns the registered live instances.
func (s *Store) Instances(ctx context.Context) ([]string, error) {
	return s.rdb.ZRange(ctx, s.keys.instances(), 0, -1).Result()
}
