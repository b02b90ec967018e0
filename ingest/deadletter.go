package ingest

import (
	"bytes"
	"context"
	"strconv"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
)

// sizeDeadLetters fits the dead-letter writer to the dead-letter topic's
// max.message.bytes: a request over it is refused on every retry, and the
// batch that holds it would hold its partitions with it. Each request stays
// under the limit, and each dead letter's key and value are cut to fit
// (dlqRoom) — its headers say where the original is.
func (in *Ingest) sizeDeadLetters(ctx context.Context) {
	if in.dlq == nil {
		return
	}
	limit := kafkaconn.DefaultMaxMessageBytes
	if client, err := in.client(); err == nil {
		limit = kafkaconn.MaxMessageBytes(ctx, client, in.opts.Kafka.DeadLetterTopic)
		kafkaconn.CloseClient(client)
	}
	in.dlq.BatchBytes = int64(limit - 100) // the batch header is not counted by kafka-go
	in.dlqRoom = max(limit-deadLetterOverhead, 64)
}

// deadLetterOverhead is what a dead letter adds to its key and value in a
// batch of its own: the batch header and record framing (~100 bytes) and
// the two headers, flatline-source naming the topic.
const deadLetterOverhead = 512

// deadLetter copies an invalid message for the dead-letter topic.
func (p *processor) deadLetter(partition int, msg *kfetch.Record, reason decode.Reason) {
	in := p.in
	source := in.opts.Kafka.SignalsTopic + "/" + strconv.Itoa(partition) + "/" + strconv.FormatInt(msg.Offset, 10)
	if ok, suppressed := p.limiter.Allow(in.opts.Now()); ok {
		in.opts.Log.Warn("invalid heartbeat dead-lettered", "reason", string(reason), "source", source, "suppressed", suppressed)
	}
	if in.dlq == nil {
		return
	}
	// Cut to fit the topic (a key at most a quarter of the room): a dead
	// letter the broker refuses would hold the partition for good.
	key, val := msg.Key, msg.Value
	room := in.dlqRoom
	if room == 0 {
		room = kafkaconn.DefaultMaxMessageBytes - deadLetterOverhead
	}
	if len(key) > room/4 {
		key = key[:room/4]
	}
	if n := min(in.cfg.MaxValueBytes, room-len(key)); len(val) > n {
		val = val[:n]
	}
	p.dead = append(p.dead, kafka.Message{
		// Copied: the record's slab goes back to its pool once the batch
		// is prepared, before the dead letters are written.
		Key: bytes.Clone(key), Value: bytes.Clone(val),
		Headers: []protocol.Header{
			{Key: "flatline-reason", Value: []byte(reason)},
			{Key: "flatline-source", Value: []byte(source)},
		},
	})
}

// sendDeadLetters writes the batch's invalid messages to the dead-letter
// topic, retrying like the Redis write: in batch order, after the batch is
// in Redis and before its offsets are committed, so an invalid message is
// never skipped unrecorded.
func (p *processor) sendDeadLetters(ctx context.Context) error {
	in := p.in
	if len(p.dead) == 0 || in.dlq == nil {
		return nil
	}
	if err := p.retryWrite(ctx, "dead-letter topic", func() error { return in.dlq.WriteMessages(ctx, p.dead...) }); err != nil {
		return err
	}
	in.opts.Metrics.DeadLettered.Add(float64(len(p.dead)))
	return nil
}
