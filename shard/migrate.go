package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Scores returns the score of each (shard, id) pair, 0/false where the id is
// not in that shard, in one round trip.
func (s *Store) Scores(ctx context.Context, shards []int, ids []string) ([]float64, []bool, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range ids {
			p.ZScore(ctx, s.keys.Deadlines(shards[k]), ids[k])
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, nil, fmt.Errorf("read scores: %w", err)
	}
	scores := make([]float64, len(ids))
	ok := make([]bool, len(ids))
	for k, c := range cmds {
		v, err := c.(*redis.FloatCmd).Result()
		if err == nil {
			scores[k], ok[k] = v, true
		}
	}
	return scores, ok, nil
}

// MoveIn writes members into shard i (ZADD GT, so a later copy there wins)
// with their override timeouts (ms, 0 = none).
func (s *Store) MoveIn(ctx context.Context, i int, ms []Member, overrides map[string]int64) error {
	if len(ms) == 0 {
		return nil
	}
	zs := make([]redis.Z, len(ms))
	for k, m := range ms {
		zs[k] = redis.Z{Score: m.Score, Member: m.ID}
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, s.keys.Deadlines(i), zs...)
		for id, ms := range overrides {
			if ms > 0 {
				p.HSet(ctx, s.keys.Overrides(i), id, ms)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("move into shard %d: %w", i, err)
	}
	return nil
}

// ScanShard returns up to count members of shard i from cursor (ZSCAN) and
// the next cursor (0 at the end).
func (s *Store) ScanShard(ctx context.Context, i int, cursor uint64, count int64) ([]Member, uint64, error) {
	vals, next, err := s.rdb.ZScan(ctx, s.keys.Deadlines(i), cursor, "", count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("scan shard %d: %w", i, err)
	}
	out := make([]Member, 0, len(vals)/2)
	for k := 0; k+1 < len(vals); k += 2 {
		score, _ := strconv.ParseFloat(vals[k+1], 64)
		out = append(out, Member{ID: vals[k], Score: score})
	}
	return out, next, nil
}

// SeeLayout records that instance loaded layout epoch at nowMs.
func (s *Store) SeeLayout(ctx context.Context, instance string, epoch, nowMs int64) error {
	return s.rdb.HSet(ctx, s.keys.LayoutSeen(), instance, strconv.FormatInt(epoch, 10)+":"+strconv.FormatInt(nowMs, 10)).Err()
}

// Seen is one instance's layout acknowledgement.
type Seen struct {
	Epoch int64
	AtMs  int64
}

// LayoutSeen returns every instance's last layout acknowledgement and drops
// the ones older than staleBeforeMs (instances that are gone).
func (s *Store) LayoutSeen(ctx context.Context, staleBeforeMs int64) (map[string]Seen, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.LayoutSeen()).Result()
	if err != nil {
		return nil, fmt.Errorf("read layout acknowledgements: %w", err)
	}
	out := make(map[string]Seen, len(m))
	var gone []string
	for id, v := range m {
		e, at, _ := strings.Cut(v, ":")
		var sn Seen
		sn.Epoch, _ = strconv.ParseInt(e, 10, 64)
		sn.AtMs, _ = strconv.ParseInt(at, 10, 64)
		if sn.AtMs < staleBeforeMs {
			gone = append(gone, id)
			continue
		}
		out[id] = sn
	}
	if len(gone) > 0 {
		s.rdb.HDel(ctx, s.keys.LayoutSeen(), gone...)
	}
	return out, nil
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
	return s.rdb.HSet(ctx, s.keys.Migration(), "epoch", p.Epoch, "misplaced", p.Misplaced, "moved", p.Moved,
		"total", p.Total, "updated_ms", p.UpdatedMs).Err()
}

// GetProgress reads the migration progress (ok false when none stored).
func (s *Store) GetProgress(ctx context.Context) (Progress, bool, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Migration()).Result()
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
