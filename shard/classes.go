package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// RegisterClasses returns the stable ids of the named classes, assigning
// new ones to classes seen for the first time.
func (s *Store) RegisterClasses(ctx context.Context, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+len(names))
	args = append(args, maxClassID)
	for _, n := range names {
		args = append(args, n)
	}
	ids, err := scriptClasses.Run(ctx, s.rdb, []string{s.keys.Classes()}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("register classes: %w", err)
	}
	out := make([]int, len(ids))
	for k, id := range ids {
		out[k] = int(id)
	}
	return out, nil
}

// ClassNames returns the registry: class id -> name.
func (s *Store) ClassNames(ctx context.Context) (map[int]string, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.Classes()).Result()
	if err != nil {
		return nil, fmt.Errorf("read classes: %w", err)
	}
	out := make(map[int]string)
	for k, v := range m {
		if idStr, ok := strings.CutPrefix(k, "i:"); ok {
			if id, err := strconv.Atoi(idStr); err == nil {
				out[id] = v
			}
		}
	}
	return out, nil
}
