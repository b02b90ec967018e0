package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
)

// Tail prints the events of the timeouts topic to w, one JSON value per
// line, until ctx is done (then it returns nil). It starts at the end of
// every partition unless fromBeginning.
//
// It reads without a consumer group, so it commits nothing and never takes
// partitions away from anyone: one kafka-go Reader per partition, as
// kafka-go has no group-less reader of a whole topic. Partitions added
// while it runs are not followed. Lines of different partitions interleave
// in arrival order; the lines of one device keep their order.
func Tail(ctx context.Context, k kafkaconn.Config, fromBeginning bool, w io.Writer) error {
	dialer, err := k.Dialer()
	if err != nil {
		return err
	}
	parts, err := lookupPartitions(ctx, dialer, k.Brokers, k.TimeoutsTopic)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var line []byte
	g, gctx := errgroup.WithContext(ctx)
	for _, part := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   k.Brokers,
			Topic:     k.TimeoutsTopic,
			Partition: part,
			Dialer:    dialer,
			MaxWait:   500 * time.Millisecond,
		})
		if !fromBeginning {
			// StartOffset is for consumer groups only; a group-less
			// reader starts at FirstOffset unless told otherwise.
			if err := r.SetOffset(kafka.LastOffset); err != nil {
				_ = r.Close()
				return fmt.Errorf("tail %s partition %d: %w", k.TimeoutsTopic, part, err)
			}
		}
		g.Go(func() error {
			defer r.Close()
			for {
				m, err := r.ReadMessage(gctx)
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("tail %s partition %d: %w", k.TimeoutsTopic, part, err)
				}
				mu.Lock()
				line = append(append(line[:0], m.Value...), '\n')
				_, err = w.Write(line)
				mu.Unlock()
				if err != nil {
					return fmt.Errorf("tail: write: %w", err)
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return nil
}

// lookupPartitions lists the topic's partitions from the first broker that
// answers.
func lookupPartitions(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) ([]int, error) {
	var errs []error
	for _, b := range brokers {
		ps, err := d.LookupPartitions(ctx, "tcp", b, topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		ids := make([]int, 0, len(ps))
		for _, p := range ps {
			ids = append(ids, p.ID)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("tail %s: topic has no partitions", topic)
		}
		return ids, nil
	}
	return nil, fmt.Errorf("tail %s: list partitions: %w", topic, errors.Join(errs...))
}
