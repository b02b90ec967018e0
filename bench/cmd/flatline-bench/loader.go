package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flatline-dev/flatline/shard"
)

const (
	keyPrefix = "flatline" // redis.key_prefix default
	// loadBatch is the members per Store.Write when loading directly; the
	// same order as an ingest batch (ingest.batch_size 4096) but larger, to
	// save time.
	loadBatch = 16384
	loaders   = 2
)

// idIndex returns k for the key of sample.DeviceIDs(prefix, n)[k].
func idIndex(prefix string, key []byte, n int) (int, bool) {
	if len(key) <= len(prefix) || string(key[:len(prefix)]) != prefix {
		return 0, false
	}
	k := 0
	for _, c := range key[len(prefix):] {
		if c < '0' || c > '9' {
			return 0, false
		}
		k = 10*k + int(c-'0')
		if k >= n {
			return 0, false
		}
	}
	return k, true
}

// loadDeadlines tracks every id straight through shard.Store.Write, the
// call ingest makes, with the deadline deadlineOf(k) for ids[k] and no
// class. It returns the time taken.
func loadDeadlines(ctx context.Context, st *shard.Store, shards int, ids []string, deadlineOf func(k int) int64) (time.Duration, error) {
	return loadFamily(ctx, st, shards, ids, deadlineOf, "")
}

// loadFamily is loadDeadlines for children of parent (none when ""): each
// names parent as ingest records a heartbeat's "parent".
func loadFamily(ctx context.Context, st *shard.Store, shards int, ids []string, deadlineOf func(k int) int64, parent string) (time.Duration, error) {
	pi := shard.Of(shard.Hash(parent), shards)
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	next := 0
	for w := 0; w < loaders; w++ {
		g.Go(func() error {
			var b shard.Batch
			for {
				mu.Lock()
				from := next
				next += loadBatch
				mu.Unlock()
				if from >= len(ids) {
					return nil
				}
				to := min(from+loadBatch, len(ids))
				b.Reset(shards)
				for k := from; k < to; k++ {
					id := ids[k]
					i := shard.Of(shard.Hash(id), shards)
					b.Add(i, id, shard.Score(deadlineOf(k), 0), 0)
					if parent != "" {
						b.SetParent(i, id, parent, pi)
					}
				}
				if _, err := st.Write(ctx, &b); err != nil {
					return err
				}
			}
		})
	}
	err := g.Wait()
	return time.Since(start), err
}

// waitReady waits until flatline has a watermark for every signals
// partition and owns every shard's lease: from then on a due deadline fires
// at once.
func waitReady(ctx context.Context, st *shard.Store, fl *flatlineProc, partitions, shards int, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		if exited, err := fl.Exited(); exited {
			return 0, fmt.Errorf("flatline exited during start: %v", err)
		}
		wms, n, err := st.Watermarks(ctx)
		ok := err == nil && n == partitions && len(wms) >= partitions
		if ok {
			owners, err := st.LeaseOwners(ctx, shards)
			ok = err == nil
			for _, o := range owners {
				ok = ok && o != ""
			}
		}
		if ok {
			return time.Since(fl.Started), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("flatline not ready (watermarks of all %d partitions, all %d leases) within %s", partitions, shards, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
