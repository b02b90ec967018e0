package shard

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// AcquireLease takes shard i's lease for owner if nobody holds it.
func (s *Store) AcquireLease(ctx context.Context, i int, owner string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.keys.Lease(i), owner, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("acquire lease of shard %d: %w", i, err)
	}
	return ok, nil
}

// RenewLease extends shard i's lease if owner holds it.
func (s *Store) RenewLease(ctx context.Context, i int, owner string, ttl time.Duration) (bool, error) {
	n, err := scriptRenew.Run(ctx, s.rdb, []string{s.keys.Lease(i)}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew lease of shard %d: %w", i, err)
	}
	return n == 1, nil
}

// RenewLeases extends the leases of shards that owner holds, in one round
// trip (in a cluster, one per node): renewed[k] says whether shards[k]'s
// was. An instance renews all it holds at once, so many shards cost one
// round trip, not one each; and, but in a cluster (where each shard's lease
// is in a slot of its own), renewPerCall leases a script call, not one.
func (s *Store) RenewLeases(ctx context.Context, shards []int, owner string, ttl time.Duration) (renewed []bool, err error) {
	if len(shards) == 0 {
		return nil, nil
	}
	_, cluster := s.rdb.(*redis.ClusterClient)
	cmds, err := s.pipelined(ctx, func(p redis.Pipeliner) error {
		if cluster {
			for _, i := range shards {
				scriptRenew.EvalSha(ctx, p, []string{s.keys.Lease(i)}, owner, ttl.Milliseconds())
			}
			return nil
		}
		for from := 0; from < len(shards); from += renewPerCall {
			part := shards[from:min(from+renewPerCall, len(shards))]
			keys := make([]string, len(part))
			for k, i := range part {
				keys[k] = s.keys.Lease(i)
			}
			scriptRenewMany.EvalSha(ctx, p, keys, owner, ttl.Milliseconds())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew the leases of %d shards: %w", len(shards), err)
	}
	renewed = make([]bool, 0, len(shards))
	for _, c := range cmds {
		if cluster {
			n, _ := c.(*redis.Cmd).Int()
			renewed = append(renewed, n == 1)
			continue
		}
		ns, err := c.(*redis.Cmd).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("renew the leases of %d shards: %w", len(shards), err)
		}
		for _, n := range ns {
			renewed = append(renewed, n == 1)
		}
	}
	if len(renewed) != len(shards) {
		return nil, fmt.Errorf("renew the leases of %d shards: %d answers", len(shards), len(renewed))
	}
	return renewed, nil
}

// renewPerCall bounds the leases one call of lease_renew_many renews: Redis
// runs nothing else meanwhile.
const renewPerCall = 256

// ReleaseLease drops shard i's lease if owner holds it.
func (s *Store) ReleaseLease(ctx context.Context, i int, owner string) error {
	if err := scriptRelease.Run(ctx, s.rdb, []string{s.keys.Lease(i)}, owner).Err(); err != nil {
		return fmt.Errorf("release lease of shard %d: %w", i, err)
	}
	return nil
}

// LeaseOwners returns the owner of each of shards 0..n-1 ("" when free).
func (s *Store) LeaseOwners(ctx context.Context, n int) ([]string, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.Get(ctx, s.keys.Lease(i))
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	out := make([]string, n)
	for i, c := range cmds {
		out[i] = c.(*redis.StringCmd).Val()
	}
	return out, nil
}
