package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Layout is the shard layout rebalance owns and everyone routes by.
//
// Count is the number of shards devices are written to. While a doubling (or
// halving) is under way Previous is the count before it and devices may
// still sit in their shard under Previous; Previous is 0 otherwise.
type Layout struct {
	Count    int   `json:"count"`
	Previous int   `json:"previous"`
	Epoch    int64 `json:"epoch"`
	SinceMs  int64 `json:"since_ms"`
}

// Migrating reports whether members may still sit in their previous shard.
func (l Layout) Migrating() bool { return l.Previous != 0 && l.Previous != l.Count }

// ShardOf is the shard a device with routing hash h is written to.
func (l Layout) ShardOf(h uint64) int { return Of(h, l.Count) }

// PreviousOf is the shard a device with hash h had under the previous count,
// and whether that differs from its shard now.
func (l Layout) PreviousOf(h uint64) (int, bool) {
	if !l.Migrating() {
		return 0, false
	}
	p := Of(h, l.Previous)
	return p, p != Of(h, l.Count)
}

// Shards is the number of shard keys in use: the larger of both counts while
// migrating.
func (l Layout) Shards() int {
	if l.Migrating() && l.Previous > l.Count {
		return l.Previous
	}
	return l.Count
}

// ErrLayoutChanged is returned by SetLayout when the stored layout is no
// longer the one the caller read.
var ErrLayoutChanged = errors.New("layout changed meanwhile")

// Layout reads the stored layout; ok is false when none was stored yet.
func (s *Store) Layout(ctx context.Context) (l Layout, ok bool, err error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.layout()).Result()
	if err != nil {
		return Layout{}, false, fmt.Errorf("read layout: %w", err)
	}
	if len(m) == 0 {
		return Layout{}, false, nil
	}
	l.Count, _ = strconv.Atoi(m["count"])
	l.Previous, _ = strconv.Atoi(m["previous"])
	l.Epoch, _ = strconv.ParseInt(m["epoch"], 10, 64)
	l.SinceMs, _ = strconv.ParseInt(m["since_ms"], 10, 64)
	if !ValidCount(l.Count) {
		return Layout{}, false, fmt.Errorf("stored layout has invalid count %q", m["count"])
	}
	return l, true, nil
}

// SetLayout stores l if the stored epoch is still readEpoch (0: none yet),
// and returns l with its new epoch; ErrLayoutChanged otherwise.
func (s *Store) SetLayout(ctx context.Context, readEpoch int64, l Layout) (Layout, error) {
	epoch, err := scriptLayout.Run(ctx, s.rdb, []string{s.keys.layout()},
		readEpoch, l.Count, l.Previous, l.SinceMs).Int64()
	if err != nil {
		return Layout{}, fmt.Errorf("write layout: %w", err)
	}
	if epoch == 0 {
		return Layout{}, ErrLayoutChanged
	}
	l.Epoch = epoch
	return l, nil
}

// SeeLayout records that instance loaded layout epoch at nowMs.
func (s *Store) SeeLayout(ctx context.Context, instance string, epoch, nowMs int64) error {
	return s.rdb.HSet(ctx, s.keys.layoutSeen(), instance, strconv.FormatInt(epoch, 10)+":"+strconv.FormatInt(nowMs, 10)).Err()
}

// Seen is one instance's layout acknowledgement.
type Seen struct {
	Epoch int64
	AtMs  int64
}

// LayoutSeen returns every instance's last layout acknowledgement and drops
// the ones older than staleBeforeMs (instances that are gone).
func (s *Store) LayoutSeen(ctx context.Context, staleBeforeMs int64) (map[string]Seen, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.layoutSeen()).Result()
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
		s.rdb.HDel(ctx, s.keys.layoutSeen(), gone...)
	}
	return out, nil
}
