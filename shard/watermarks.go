package shard

import (
	"context"
	"fmt"
	"strconv"
)

// RaiseWatermarks moves the watermarks of the given partitions forward
// (never back) and records the partition count when partitions > 0.
func (s *Store) RaiseWatermarks(ctx context.Context, partitions int, wm map[int]int64) error {
	if len(wm) == 0 && partitions == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*len(wm))
	args = append(args, partitions)
	for p, ms := range wm {
		args = append(args, p, ms)
	}
	if err := scriptWMRaise.Run(ctx, s.rdb, []string{s.keys.Watermarks()}, args...).Err(); err != nil {
		return fmt.Errorf("raise watermarks: %w", err)
	}
	return nil
}

// Watermarks returns wm(p) for every partition that has one and the
// partition count ingest recorded (0 if none yet).
func (s *Store) Watermarks(ctx context.Context) (map[int]int64, int, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Watermarks()).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("read watermarks: %w", err)
	}
	out := make(map[int]int64, len(m))
	n := 0
	for k, v := range m {
		ms, _ := strconv.ParseInt(v, 10, 64)
		if k == "partitions" {
			n = int(ms)
			continue
		}
		p, err := strconv.Atoi(k)
		if err == nil {
			out[p] = ms
		}
	}
	return out, n, nil
}

// MinWatermark is the firing watermark of wms as Watermarks returns them:
// the minimum over partitions 0 to partitions-1, a partition without a
// watermark counting as 0. ok is false when there are no partitions yet.
func MinWatermark(wms map[int]int64, partitions int) (min int64, ok bool) {
	if partitions <= 0 {
		return 0, false
	}
	min = -1
	for p := 0; p < partitions; p++ {
		if v := wms[p]; min < 0 || v < min {
			min = v
		}
	}
	return min, true
}
