package scanner

import (
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// poll is the safety net, one gocron job for all shards: every
// scanner.interval it reads the next deadline of every shard this instance
// scans, and wakes the shards whose deadline is due or sets their timer for
// one due before the next poll. Scanners do not wait for it: a pass sets
// the timer for the deadline it found next, and a write that brings a
// shard's next deadline within a poll's reach wakes the shard itself (see
// shard.Store.SetWakes and Wakes). The poll finds what no wake-up reported:
// an announcement lost while a subscription was down, a pass that failed, a
// write by a process that does not announce.
//
// The shards are read a slice at a time, in one round trip per slice: the
// job runs pollSlices times an interval, each run reading the shards whose
// id is its slice's modulo pollSlices, so each shard is still read once an
// interval, at the same point of it. Read all at once, 4,096 shards were a
// burst of 4,096 commands a second, several milliseconds of Redis's time
// in one go, and ingest's writes and watermark raises queued behind it: on
// a busy machine, the deadlines due around each burst fired tens of
// milliseconds late.
func (s *Scanner) poll() {
	slice := s.pollNext
	s.pollNext = (s.pollNext + 1) % s.pollSlices
	s.mu.Lock()
	scs, ids := s.polled[:0], s.pollIDs[:0]
	for id, sc := range s.shards {
		if id%s.pollSlices == slice {
			scs, ids = append(scs, sc), append(ids, id)
		}
	}
	s.mu.Unlock()
	defer func() {
		clear(scs)
		s.polled, s.pollIDs = scs[:0], ids[:0]
	}()
	if len(ids) == 0 {
		return
	}
	ctx := s.dispatchCtx
	fronts, ok, err := s.opts.Store.Fronts(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Metrics.ScanErrors.Inc()
			s.scans.Failed(err, "shards", len(ids))
		}
		return
	}
	s.scans.Succeeded()
	now := s.opts.Now().UnixMilli()
	for k, sc := range scs {
		if ok[k] {
			deadline, _ := shard.DecodeScore(fronts[k].Score)
			sc.polled(deadline, now)
		}
	}
}

// pollSlices is how many slices the poll reads the shards in over an
// interval: one per pollStep, at most maxPollSlices, at least one.
func pollSlices(interval time.Duration) int {
	return int(min(max(interval/pollStep, 1), maxPollSlices))
}

// A poll reads a slice of the shards every pollStep (see poll), in at most
// maxPollSlices slices.
const (
	pollStep      = 100 * time.Millisecond
	maxPollSlices = 10
)
