package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Copy is what a shard holds of a device: its live deadline score and the
// score of a timeout it already fired there.
type Copy struct {
	Live, Down       float64
	HasLive, HasDown bool
}

// Copies returns, for each (shard, id) pair, what that shard holds of the
// id, in one round trip. The deadline is read before the down score, and
// fired.lua moves a member from one to the other atomically, so a copy that
// fires meanwhile is still seen.
func (s *Store) Copies(ctx context.Context, shards []int, ids []string) ([]Copy, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range ids {
			p.ZScore(ctx, s.keys.Deadlines(shards[k]), ids[k])
			p.ZScore(ctx, s.keys.Down(shards[k]), ids[k])
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, fmt.Errorf("read scores: %w", err)
	}
	out := make([]Copy, len(ids))
	for k := range ids {
		if v, err := cmds[2*k].(*redis.FloatCmd).Result(); err == nil {
			out[k].Live, out[k].HasLive = v, true
		}
		if v, err := cmds[2*k+1].(*redis.FloatCmd).Result(); err == nil {
			out[k].Down, out[k].HasDown = v, true
		}
	}
	return out, nil
}

// MoveIn writes members into shard i like heartbeats (Write: ZADD GT,
// and a copy not later than a timeout the device already fired there is
// dropped) with their override timeouts (ms, 0 = none).
func (s *Store) MoveIn(ctx context.Context, i int, ms []Member, overrides map[string]int64) error {
	if len(ms) == 0 {
		return nil
	}
	var b Batch
	b.Reset(i + 1)
	for _, m := range ms {
		b.Add(i, m.ID, m.Score, overrides[m.ID])
	}
	if _, err := s.Write(ctx, &b); err != nil {
		return fmt.Errorf("move into shard %d: %w", i, err)
	}
	return nil
}

// ScanShard returns up to count members of shard i from cursor (ZSCAN) and
// the next cursor (0 at the end).
func (s *Store) ScanShard(ctx context.Context, i int, cursor uint64, count int64) ([]Member, uint64, error) {
	ms, next, err := s.scan(ctx, s.keys.Deadlines(i), cursor, count)
	if err != nil {
		return nil, 0, fmt.Errorf("scan shard %d: %w", i, err)
	}
	return ms, next, nil
}

// ScanDown is ScanShard for shard i's down set.
func (s *Store) ScanDown(ctx context.Context, i int, cursor uint64, count int64) ([]Member, uint64, error) {
	ms, next, err := s.scan(ctx, s.keys.Down(i), cursor, count)
	if err != nil {
		return nil, 0, fmt.Errorf("scan down set of shard %d: %w", i, err)
	}
	return ms, next, nil
}

func (s *Store) scan(ctx context.Context, key string, cursor uint64, count int64) ([]Member, uint64, error) {
	vals, next, err := s.rdb.ZScan(ctx, key, cursor, "", count).Result()
	if err != nil {
		return nil, 0, err
	}
	out := make([]Member, 0, len(vals)/2)
	for k := 0; k+1 < len(vals); k += 2 {
		score, _ := strconv.ParseFloat(vals[k+1], 64)
		out = append(out, Member{ID: vals[k], Score: score})
	}
	return out, next, nil
}

// MoveDown copies down entries ms of shard from into the down set of shard
// to (ZADD GT), then removes them from from's, each only if unchanged. It
// returns how many it removed. (Two commands, not one script: the shards'
// keys may live on different Redis Cluster nodes. Meanwhile an entry is in
// both; Store.Write reports a device found back in both once.)
func (s *Store) MoveDown(ctx context.Context, from, to int, ms []Member) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	zs := make([]redis.Z, len(ms))
	args := make([]any, 0, 2*len(ms))
	for k, m := range ms {
		zs[k] = redis.Z{Score: m.Score, Member: m.ID}
		args = append(args, m.ID, m.Score)
	}
	if err := s.rdb.ZAddGT(ctx, s.keys.Down(to), zs...).Err(); err != nil {
		return 0, fmt.Errorf("move down entries into shard %d: %w", to, err)
	}
	vals, err := scriptDownClr.Run(ctx, s.rdb, []string{s.keys.Down(from)}, args...).Slice()
	if err != nil {
		return 0, fmt.Errorf("remove moved down entries from shard %d: %w", from, err)
	}
	return len(vals) / 2, nil
}

// Progress is the sweeper's account of a migration.
type Progress struct {
	Epoch     int64 `json:"epoch"`
	Misplaced int64 `json:"misplaced"`
	Moved     int64 `json:"moved"`
	Total     int64 `json:"total"`
	UpdatedMs int64 `json:"updated_ms"`
}

// SetProgress stores the migration progress.
func (s *Store) SetProgress(ctx context.Context, p Progress) error {
	return s.rdb.HSet(ctx, s.keys.migration(), "epoch", p.Epoch, "misplaced", p.Misplaced, "moved", p.Moved,
		"total", p.Total, "updated_ms", p.UpdatedMs).Err()
}

// GetProgress reads the migration progress (ok false when none stored).
func (s *Store) GetProgress(ctx context.Context) (Progress, bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.migration()).Result()
	if err != nil {
		return Progress{}, false, fmt.Errorf("read migration progress: %w", err)
	}
	if len(m) == 0 {
		return Progress{}, false, nil
	}
	var p Progress
	p.Epoch, _ = strconv.ParseInt(m["epoch"], 10, 64)
	p.Misplaced, _ = strconv.ParseInt(m["misplaced"], 10, 64)
	p.Moved, _ = strconv.ParseInt(m["moved"], 10, 64)
	p.Total, _ = strconv.ParseInt(m["total"], 10, 64)
	p.UpdatedMs, _ = strconv.ParseInt(m["updated_ms"], 10, 64)
	return p, true, nil
}
