package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// DownScores returns, for each of ms, the score of the timeout it fired in
// shard i, or 0 when it is not remembered as down.
func (s *Store) DownScores(ctx context.Context, i int, ms []Member) ([]float64, error) {
	// ZMSCORE built here with pointers to the ids: go-redis's ZMScore boxes
	// each string into an interface, an allocation per member.
	args := make([]any, 2+len(ms))
	args[0], args[1] = "zmscore", s.keys.Down(i)
	for k := range ms {
		args[2+k] = &ms[k].ID
	}
	cmd := redis.NewFloatSliceCmd(ctx, args...)
	_ = s.rdb.Process(ctx, cmd)
	vals, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("read down set of shard %d: %w", i, err)
	}
	return vals, nil
}

// Due returns up to limit members of shard i with score ≤ max, skipping the
// first offset of them, earliest first.
func (s *Store) Due(ctx context.Context, i int, max float64, offset, limit int) ([]Member, error) {
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: s.keys.Deadlines(i), Start: "-inf", Stop: strconv.FormatFloat(max, 'f', -1, 64),
		ByScore: true, Offset: int64(offset), Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("scan shard %d: %w", i, err)
	}
	out := make([]Member, len(zs))
	for k, z := range zs {
		out[k] = Member{ID: z.Member.(string), Score: z.Score}
	}
	return out, nil
}

// DueWindows reads k consecutive windows of shard i by rank in one round
// trip: window j holds the members at ranks offset + j·stride … offset +
// j·stride + size − 1, earliest first. A scanner that keeps finding full
// pops reads several pops ahead this way. The windows must touch or overlap
// (stride ≤ size; the scanner's are each pop and the member after it): they
// are one ZRANGE, cut into windows here, so while a shard drains a read is
// one command for hundreds of members, not one per pop. By rank, not by score:
// Redis finds a rank in O(log n), while a score range walks its offset
// member by member, and the scanner skips the members it has in flight,
// thousands of them during a mass expiry.
//
// With oneScore, the read first takes the range as one run of one score
// (a shared deadline: a mass expiry, devices whose clocks send whole
// seconds): its members without scores and the scores of its two ends, in
// one MULTI; Redis 7.0 prints every score it returns with printf, most of
// what a read costs it. When the ends differ, it reads again with scores.
// The second result says whether the range held one score: the guess for
// the next read.
func (s *Store) DueWindows(ctx context.Context, i, offset, stride, size, k int, oneScore bool) ([][]Member, bool, error) {
	if stride > size {
		return nil, false, fmt.Errorf("scan shard %d: windows of %d members %d apart leave gaps", i, size, stride)
	}
	start := int64(offset)
	stop := start + int64((k-1)*stride+size) - 1
	var all []Member
	if oneScore {
		var err error
		if all, oneScore, err = s.dueOneScore(ctx, i, start, stop); err != nil {
			return nil, false, err
		}
	}
	if !oneScore {
		zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Deadlines(i), start, stop).Result()
		if err != nil {
			return nil, false, fmt.Errorf("scan shard %d: %w", i, err)
		}
		all = make([]Member, len(zs))
		for n, z := range zs {
			all[n] = Member{ID: z.Member.(string), Score: z.Score}
		}
		oneScore = len(all) > 1 && all[0].Score == all[len(all)-1].Score
	}
	out := make([][]Member, k)
	for j := range out {
		from, to := min(j*stride, len(all)), min(j*stride+size, len(all))
		out[j] = all[from:to:to]
	}
	return out, oneScore, nil
}

// dueOneScore reads the members of shard i at ranks start … stop when they
// share one score (or there are none), and reports whether it did.
func (s *Store) dueOneScore(ctx context.Context, i int, start, stop int64) ([]Member, bool, error) {
	key := s.keys.Deadlines(i)
	var names *redis.StringSliceCmd
	var first, last, tail *redis.ZSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		names = p.ZRange(ctx, key, start, stop)
		first = p.ZRangeWithScores(ctx, key, start, start)
		last = p.ZRangeWithScores(ctx, key, stop, stop)
		tail = p.ZRangeWithScores(ctx, key, -1, -1) // the range's last when it runs past the end
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("scan shard %d: %w", i, err)
	}
	ids, lo, hi := names.Val(), first.Val(), last.Val()
	if len(hi) == 0 {
		hi = tail.Val()
	}
	if len(ids) == 0 {
		return nil, true, nil
	}
	if len(lo) == 0 || len(hi) == 0 || lo[0].Score != hi[0].Score {
		return nil, false, nil
	}
	all := make([]Member, len(ids))
	for n, id := range ids {
		all[n] = Member{ID: id, Score: lo[0].Score}
	}
	return all, true, nil
}

// Next returns the earliest member of shard i, if any.
func (s *Store) Next(ctx context.Context, i int) (Member, bool, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Deadlines(i), 0, 0).Result()
	if err != nil {
		return Member{}, false, fmt.Errorf("peek shard %d: %w", i, err)
	}
	if len(zs) == 0 {
		return Member{}, false, nil
	}
	return Member{ID: zs[0].Member.(string), Score: zs[0].Score}, true, nil
}

// OverridesOf returns the per-device timeouts (ms) of those of ms in shard i
// whose score says they have one (FlagOverride): nil, without a round trip,
// when none does.
func (s *Store) OverridesOf(ctx context.Context, i int, ms []Member) (map[string]int64, error) {
	var ids []string
	for _, m := range ms {
		if _, meta := DecodeScore(m.Score); meta.Has(FlagOverride) {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.Overrides(ctx, i, ids)
}

// Overrides returns the per-device timeouts (ms) of ids in shard i that
// have one.
func (s *Store) Overrides(ctx context.Context, i int, ids []string) (map[string]int64, error) {
	vals, err := s.rdb.HMGet(ctx, s.keys.Overrides(i), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("read overrides of shard %d: %w", i, err)
	}
	out := make(map[string]int64, len(ids))
	for k, v := range vals {
		if str, ok := v.(string); ok {
			if ms, err := strconv.ParseInt(str, 10, 64); err == nil {
				out[ids[k]] = ms
			}
		}
	}
	return out, nil
}

// Score returns the score of device id in shard i, if tracked there.
func (s *Store) Score(ctx context.Context, i int, id string) (float64, bool, error) {
	v, ok, err := s.zscore(ctx, s.keys.Deadlines(i), id)
	if err != nil {
		return 0, false, fmt.Errorf("read score in shard %d: %w", i, err)
	}
	return v, ok, nil
}

// DownScore returns the score of the timeout device id fired in shard i, if
// it is remembered as down.
func (s *Store) DownScore(ctx context.Context, i int, id string) (float64, bool, error) {
	v, ok, err := s.zscore(ctx, s.keys.Down(i), id)
	if err != nil {
		return 0, false, fmt.Errorf("read down state in shard %d: %w", i, err)
	}
	return v, ok, nil
}

// zscore returns the score of member in the sorted set key, and false
// when it is not a member.
func (s *Store) zscore(ctx context.Context, key, member string) (float64, bool, error) {
	v, err := s.rdb.ZScore(ctx, key, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// Sizes returns the number of members of shards 0..n-1 in one round trip.
func (s *Store) Sizes(ctx context.Context, n int) ([]int64, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.ZCard(ctx, s.keys.Deadlines(i))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read shard sizes: %w", err)
	}
	out := make([]int64, n)
	for i, c := range cmds {
		out[i] = c.(*redis.IntCmd).Val()
	}
	return out, nil
}

// Tracked returns how many members shards 0..n-1 hold together: the
// devices tracked (Sizes, summed).
func (s *Store) Tracked(ctx context.Context, n int) (int64, error) {
	sizes, err := s.Sizes(ctx, n)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, v := range sizes {
		total += v
	}
	return total, nil
}

// SizesAndDue returns, for shards 0..n-1, how many members each holds and
// how many of them are due by dueByMs (a deadline at or before it, whatever
// the score's meta), in one round trip of ZCARD and ZCOUNT: /metrics reads
// the backlog of every shard at each scrape.
func (s *Store) SizesAndDue(ctx context.Context, n int, dueByMs int64) (sizes, due []int64, err error) {
	max := strconv.FormatFloat(MaxScore(dueByMs), 'f', -1, 64)
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i++ {
			p.ZCard(ctx, s.keys.Deadlines(i))
			p.ZCount(ctx, s.keys.Deadlines(i), "-inf", max)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read shard sizes: %w", err)
	}
	sizes, due = make([]int64, n), make([]int64, n)
	for i := 0; i < n; i++ {
		sizes[i] = cmds[2*i].(*redis.IntCmd).Val()
		due[i] = cmds[2*i+1].(*redis.IntCmd).Val()
	}
	return sizes, due, nil
}
