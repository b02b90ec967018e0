package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
)

// partitionCounter asks a broker how many partitions the signals topic has,
// on a connection of its own. kafka-go's Client answers metadata from its
// Transport's cache, refreshed every few seconds, and its ConsumerGroup
// looks every PartitionWatchInterval: either would let partitions added to
// the topic — where the devices whose keys moved now beat — go unread while
// the watermark of the old ones moves on and firing follows it.
//
// A count asked after a moment T is a confirmation for T: partitions are
// only ever added, so the topic had at most that many at T, and a producer
// could not have written to any other. The prober asks beside each
// high-water-mark probe, after reading the probe's send time, so every
// watermark it raises is confirmed that way.
type partitionCounter struct {
	dialer  *kafka.Dialer
	brokers []string
	topic   string

	conn *kafka.Conn
	next int // the broker to dial next, round robin
}

// countTimeout bounds one metadata request.
const countTimeout = 5 * time.Second

// count returns the topic's partition count as a broker tells it now.
func (c *partitionCounter) count(ctx context.Context) (int, error) {
	if c.conn == nil {
		addr := c.brokers[c.next%len(c.brokers)]
		c.next++
		dctx, cancel := context.WithTimeout(ctx, countTimeout)
		conn, err := c.dialer.DialContext(dctx, "tcp", addr)
		cancel()
		if err != nil {
			return 0, err
		}
		c.conn = conn
	}
	deadline := time.Now().Add(countTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.conn.SetDeadline(deadline)
	parts, err := c.conn.ReadPartitions(c.topic)
	if err == nil && len(parts) == 0 {
		err = errors.New("the signals topic has no partitions")
	}
	if err != nil {
		c.close()
		return 0, err
	}
	return len(parts), nil
}

func (c *partitionCounter) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}
