package scanner

import (
	"github.com/flatline-dev/flatline/shard"
)

// poll is the safety net, one gocron job for all shards: every
// scanner.interval it reads the next deadline of every shard this instance
// scans, in one round trip, and wakes the shards whose deadline is due or
// sets their timer for one due before the next poll. Scanners do not wait
// for it: a pass sets the timer for the deadline it found next, and a write
// that brings a shard's next deadline within a poll's reach wakes the
// shard itself (see shard.Store.SetWakes and Wakes). The poll finds what no
// wake-up reported: an announcement lost while a subscription was down, a
// pass that failed, a write by a process that does not announce.
func (s *Scanner) poll() {
	s.mu.Lock()
	scs, ids := s.polled[:0], s.pollIDs[:0]
	for id, sc := range s.shards {
		scs, ids = append(scs, sc), append(ids, id)
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
