package shard

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// DownPos is a down entry and its place in its shard's down set, in the
// set's own order: by score (the deadline that passed, then the class),
// then by id byte by byte, which is how Redis orders members of one score.
// That order is stable under writes: an entry's place depends on its own
// score and id alone, so reading on after a DownPos neither repeats an
// entry nor skips one that stayed put, whatever came or went meanwhile.
type DownPos struct {
	Member
	// Tie is how many entries of Score sort at or before ID, as of the read
	// that returned it. Many devices share a score in a mass expiry; Tie
	// lets the next read start near ID within them instead of at their
	// first (see DownAfter).
	Tie int
}

// downResumeSlack is how many entries of the cursor's score may leave
// between two reads before DownAfter has to read the score's run again
// from its start.
const downResumeSlack = 32

// DownAfter reads up to count entries of shard i's down set with a score
// of at least min, in the set's order, after the entry at after (from the
// first when nil), and reports whether it reached the end of the set. It
// sends only ZRANGE, so the read commands can use it.
//
// Resuming after an entry needs its place among the entries of its score,
// which no score range tells: ZRANGE BYSCORE from after.Score skips Tie
// entries less a slack, and the entries at or before after are dropped
// here by comparing (score, id). The first entry read must still be at or
// before after; when it is not, more than the slack of its score left
// meanwhile, and the read starts over from the score's first entry (which
// is exact, but walks and returns the whole run: memory grows past count
// only then, by the entries of that one score).
func (s *Store) DownAfter(ctx context.Context, i int, min float64, after *DownPos, count int) ([]DownPos, bool, error) {
	if count <= 0 {
		return nil, false, fmt.Errorf("read down set of shard %d: count %d", i, count)
	}
	if after == nil || after.Score < min {
		zs, err := s.downRange(ctx, i, min, 0, count)
		if err != nil {
			return nil, false, err
		}
		return downPositions(zs, nil, 0), len(zs) < count, nil
	}
	for slack := downResumeSlack; ; slack *= 16 {
		off := max(0, after.Tie-slack)
		want := count + after.Tie - off
		zs, err := s.downRange(ctx, i, after.Score, off, want)
		if err != nil {
			return nil, false, err
		}
		if off > 0 && (len(zs) == 0 || !atOrBefore(zs[0], after)) {
			continue // the read may have started past after: read more of the run
		}
		k := 0
		for k < len(zs) && atOrBefore(zs[k], after) {
			k++
		}
		return downPositions(zs[k:], after, off+k), len(zs) < want, nil
	}
}

// downRange is ZRANGE key min +inf BYSCORE LIMIT off n WITHSCORES on shard
// i's down set.
func (s *Store) downRange(ctx context.Context, i int, min float64, off, n int) ([]redis.Z, error) {
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key: s.keys.Down(i), Start: strconv.FormatFloat(min, 'f', -1, 64), Stop: "+inf",
		ByScore: true, Offset: int64(off), Count: int64(n),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("read down set of shard %d: %w", i, err)
	}
	return zs, nil
}

// atOrBefore reports whether z sorts at or before p in a down set's order.
// Go compares strings byte by byte, as Redis compares members of one score.
func atOrBefore(z redis.Z, p *DownPos) bool {
	id, _ := z.Member.(string)
	return z.Score < p.Score || z.Score == p.Score && id <= p.ID
}

// downPositions turns a run of consecutive entries into DownPos. Every
// entry of a score above the first one's has its run's start in zs, so its
// Tie counts within zs; entries of the first score count on from tie0 when
// that score is after's (the read started inside its run), else from 0.
func downPositions(zs []redis.Z, after *DownPos, tie0 int) []DownPos {
	out := make([]DownPos, len(zs))
	tie := 0
	if after != nil && len(zs) > 0 && zs[0].Score == after.Score {
		tie = tie0
	}
	for k, z := range zs {
		if k > 0 && z.Score != zs[k-1].Score {
			tie = 0
		}
		tie++
		id, _ := z.Member.(string)
		out[k] = DownPos{Member: Member{ID: id, Score: z.Score}, Tie: tie}
	}
	return out
}
