package ingest

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/retry"
)

// commitLoop commits what the writer wrote until the generation ends, and
// once more then, so a clean shutdown leaves nothing to re-read.
func (in *Ingest) commitLoop(ctx context.Context, gen *kafka.Generation, c *pendingMax) {
	outage := retry.Outage{Log: in.opts.Log,
		Down: "commit offsets failing (they are retried; messages are re-read at worst)",
		Up:   "commit offsets resumed"}
	commit := func() {
		offsets := c.take()
		if offsets == nil {
			return
		}
		if err := gen.CommitOffsets(map[string]map[int]int64{in.opts.Kafka.SignalsTopic: offsets}); err != nil {
			if ctx.Err() == nil {
				outage.Failed(err)
			}
			c.add(offsets) // retried with the next ones
			return
		}
		outage.Succeeded()
		if h := in.opts.Hooks.Committed; h != nil {
			h(offsets)
		}
	}
	// Commits are only where a restart resumes: at most one per
	// commitEvery keeps them off the broker's hot path.
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			commit()
			return
		case <-c.wake:
			if !retry.Sleep(ctx, commitEvery-time.Since(last)) {
				commit()
				return
			}
			last = time.Now()
			commit()
		}
	}
}

// commitEvery is the shortest time between two offset commits: at most 50
// a second per instance, a trifle for a broker, and the consumer group's
// lag shows 0 within 20 ms of the last write.
const commitEvery = 20 * time.Millisecond
