package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/bench/internal/offsets"
	"github.com/flatline-dev/flatline/dispatch"
)

// received is one event of the timeouts topic as the reader saw it.
type received struct {
	dispatch.Event
	At        time.Time // when the reader got it
	Partition int32
	Offset    int64
}

// reader reads the timeouts topic from its start, outside any consumer
// group, as an independent consumer of flatline's events would.
type reader struct {
	cl    *kgo.Client
	topic string
	parts int

	mu     sync.Mutex
	events []received
	bad    int             // records that are not an event
	next   map[int32]int64 // the next offset to read, per partition
}

func newReader(brokers []string, topic string, partitions int) (*reader, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	return &reader{cl: cl, topic: topic, parts: partitions, next: map[int32]int64{}}, nil
}

// Run reads until ctx ends.
func (r *reader) Run(ctx context.Context) error {
	for {
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		r.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			var e dispatch.Event
			if err := json.Unmarshal(rec.Value, &e); err != nil {
				r.bad++
			} else {
				r.events = append(r.events, received{Event: e, At: now, Partition: rec.Partition, Offset: rec.Offset})
			}
			r.next[rec.Partition] = rec.Offset + 1
		})
		r.mu.Unlock()
	}
}

// caughtUp waits until the reader has read everything the topic holds now,
// up to timeout.
func (r *reader) caughtUp(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ends, err := offsets.Ends(ctx, r.cl, r.topic, r.parts)
	if err != nil {
		return fmt.Errorf("timeouts topic end offsets: %w", err)
	}
	for {
		r.mu.Lock()
		behind := 0
		for p, end := range ends {
			if r.next[p] < end {
				behind++
			}
		}
		r.mu.Unlock()
		if behind == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the timeouts reader is %d partitions behind after %s", behind, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// snapshot returns what was read; call it once Run has returned.
func (r *reader) snapshot() ([]received, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.events...), r.bad
}

func (r *reader) close() { r.cl.Close() }
