package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// How a scanner learns of a deadline. It reads its shard when it passes: at
// the poll that looks at every shard each scanner.interval (Fronts), when
// the timer it set for its next deadline goes off, and when a write wakes
// it. A deadline written a poll or more before it is due is seen by the
// next poll in time, and the scanner sets its timer. One written sooner
// than that may be due before any poll sees it: Write announces its shard
// (Wakes), once the write has landed, and whoever scans that shard, in this
// process or another (PublishWakes, SubscribeWakes), passes at once. That
// pass reads after the write, so it finds the deadline and sets its timer.
// So no deadline waits for a poll, whatever scanner.interval is, and the
// poll is only a safety net (an announcement lost while a subscription was
// down; Redis losing a write the announcement was about).

// Wakes is what Write and WriteAfter announce, and to whom (Options.Wakes).
type Wakes struct {
	// Within: a write of a deadline earlier than now + Within announces
	// its shard. 0 announces nothing.
	Within time.Duration
	// Announce receives the shards of a write that got such a deadline,
	// once the write has landed in Redis. It must not block and must not
	// keep the slice.
	Announce func(shards []int)
	// Now is the clock Within counts from; nil means time.Now.
	Now func() time.Time
}

// announce hands Wakes.Announce the shards of the written batch b that got
// a deadline due within Wakes.Within. Now is read after the write landed: a
// write slowed down (retries, WAIT) counts from when a scanner could first
// read it.
func (s *Store) announce(b *Batch) {
	w := &s.wakes
	if w.Within <= 0 || w.Announce == nil {
		return
	}
	// A score below that of the bound's deadline with no meta is a deadline
	// before the bound (the deadline sits in the high bits).
	bound := int64(Score(w.Now().Add(w.Within).UnixMilli(), 0))
	var soon []int
	for _, i := range b.touched {
		sb := &b.shards[i]
		for _, v := range sb.scores[:sb.n] {
			if v < bound {
				soon = append(soon, i)
				break
			}
		}
	}
	if len(soon) > 0 {
		w.Announce(soon)
	}
}

// Fronts returns the earliest member of each of shards, in one round trip
// (in a cluster, one per node): the scanners' poll. ok[k] is false when
// shards[k] is empty.
func (s *Store) Fronts(ctx context.Context, shards []int) (fronts []Member, ok []bool, err error) {
	if len(shards) == 0 {
		return nil, nil, nil
	}
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range shards {
			p.ZRangeWithScores(ctx, s.keys.Deadlines(i), 0, 0)
		}
		return nil
	})
	if err := readErr(cmds, err); err != nil {
		return nil, nil, fmt.Errorf("read the fronts of %d shards: %w", len(shards), err)
	}
	fronts, ok = make([]Member, len(shards)), make([]bool, len(shards))
	for k, c := range cmds {
		if zs := c.(*redis.ZSliceCmd).Val(); len(zs) > 0 {
			id, _ := zs[0].Member.(string)
			fronts[k], ok[k] = Member{ID: id, Score: zs[0].Score}, true
		}
	}
	return fronts, ok, nil
}

// PublishWakes wakes the scanners of shards wherever they run: one PUBLISH
// on the wakes channel (Keys.wakes), read by SubscribeWakes.
func (s *Store) PublishWakes(ctx context.Context, shards []int) error {
	if len(shards) == 0 {
		return nil
	}
	msg := make([]byte, 0, 5*len(shards))
	for k, i := range shards {
		if k > 0 {
			msg = append(msg, ',')
		}
		msg = strconv.AppendInt(msg, int64(i), 10)
	}
	if err := s.rdb.Publish(ctx, s.keys.wakes(), msg).Err(); err != nil {
		return fmt.Errorf("publish wakes: %w", err)
	}
	return nil
}

// WakeSub is a subscription to the wakes channel. go-redis keeps it up: it
// pings the connection, reconnects and subscribes again by itself, and
// every subscription it confirms, the first included, is reported by Next,
// because announcements published while it was down are lost.
type WakeSub struct {
	ps  *redis.PubSub
	ch  <-chan any
	ids []int
}

// SubscribeWakes subscribes to the wakes channel; Close ends it.
func (s *Store) SubscribeWakes(ctx context.Context) *WakeSub {
	ps := s.rdb.Subscribe(ctx, s.keys.wakes())
	return &WakeSub{ps: ps, ch: ps.ChannelWithSubscriptions()}
}

// Next waits for the subscription's next message: the shards an
// announcement names (valid until the next call), or subscribed true when
// the subscription was confirmed (again). ok is false once ctx is done or
// the subscription closed.
func (w *WakeSub) Next(ctx context.Context) (shards []int, subscribed, ok bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, false, false
		case m, open := <-w.ch:
			if !open {
				return nil, false, false
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					return nil, true, true
				}
			case *redis.Message:
				if w.ids = parseShards(m.Payload, w.ids[:0]); len(w.ids) > 0 {
					return w.ids, false, true
				}
			}
		}
	}
}

// Close ends the subscription. It returns once go-redis's goroutine that
// receives for it has stopped: that goroutine may be waiting to hand over
// a message nobody reads any more, so what is left is drained.
func (w *WakeSub) Close() error {
	err := w.ps.Close()
	for range w.ch {
	}
	return err
}

// parseShards appends the shard ids of an announcement to dst, skipping
// what is not one.
func parseShards(msg string, dst []int) []int {
	for msg != "" {
		var field string
		field, msg, _ = strings.Cut(msg, ",")
		if i, err := strconv.Atoi(field); err == nil && i >= 0 && i < MaxShards {
			dst = append(dst, i)
		}
	}
	return dst
}
