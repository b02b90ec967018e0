package shard

import (
	"context"
	"fmt"
	"strconv"
)

// Raced is a member whose timeout was published while a reset moved it
// on: its device beat again after the deadline it fired at.
type Raced struct {
	ID string
	// FiredScore is the score the timeout fired at; Score the current one.
	FiredScore, Score float64
}

// Fired removes the members whose timeouts were acknowledged, each only if
// its score is unchanged, remembers them as down, and prunes down entries
// scored below pruneBelow. It returns how many left, and the members a
// reset moved on meanwhile (kept, not remembered as down): their recovery
// is the caller's to report, since the reset ran before any down entry.
func (s *Store) Fired(ctx context.Context, i int, ms []Member, pruneBelow float64) (int, []Raced, error) {
	// The members, then their scores as runs (score, count): a group of
	// members due at one deadline passes it once (see fired.lua).
	args := make([]any, 2+len(ms), 4+2*len(ms))
	args[0] = strconv.FormatFloat(pruneBelow, 'f', -1, 64)
	args[1] = len(ms)
	for k, m := range ms {
		args[2+k] = &ms[k].ID // a pointer: a string in an interface allocates
		if k == 0 || m.Score != ms[k-1].Score {
			args = append(args, int64(m.Score), 0) // whole numbers (see Score)
		}
		args[len(args)-1] = args[len(args)-1].(int) + 1
	}
	vals, err := scriptFired.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Down(i), s.keys.Overrides(i)}, args...).Slice()
	if err != nil {
		return 0, nil, fmt.Errorf("remove fired from shard %d: %w", i, err)
	}
	if len(vals) == 0 {
		return 0, nil, fmt.Errorf("remove fired from shard %d: empty answer", i)
	}
	removed, _ := vals[0].(int64)
	var raced []Raced
	if len(vals) > 1 {
		fired := make(map[string]float64, len(ms))
		for _, m := range ms {
			fired[m.ID] = m.Score
		}
		for k := 1; k+1 < len(vals); k += 2 {
			id, _ := vals[k].(string)
			cur, _ := vals[k+1].(string)
			score, _ := strconv.ParseFloat(cur, 64)
			raced = append(raced, Raced{ID: id, FiredScore: fired[id], Score: score})
		}
	}
	return int(removed), raced, nil
}

// RemoveIf removes members of shard i whose score is unchanged and returns
// those removed with their override timeout (0 when none).
func (s *Store) RemoveIf(ctx context.Context, i int, ms []Member) (map[string]int64, error) {
	args := make([]any, 0, 2*len(ms))
	for _, m := range ms {
		args = append(args, m.ID, m.Score)
	}
	vals, err := scriptRemoveIf.Run(ctx, s.rdb, []string{s.keys.Deadlines(i), s.keys.Overrides(i)}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("remove from shard %d: %w", i, err)
	}
	out := make(map[string]int64, len(vals)/2)
	for k := 0; k+1 < len(vals); k += 2 {
		id, _ := vals[k].(string)
		o, _ := vals[k+1].(string)
		ms, _ := strconv.ParseInt(o, 10, 64)
		out[id] = ms
	}
	return out, nil
}
