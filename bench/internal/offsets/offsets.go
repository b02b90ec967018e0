// Package offsets asks a Kafka broker where a topic's partitions end, as
// flatline-bench (timing the broker's answer) and flatline-soak (reading
// the timeouts topic to its end) both do, with franz-go's kmsg.
package offsets

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LatestRequest is a ListOffsets request for the latest offset (the
// high-water mark) of partitions 0 to partitions-1 of topic.
func LatestRequest(topic string, partitions int) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// Ends returns the high-water mark of every partition of topic.
func Ends(ctx context.Context, cl *kgo.Client, topic string, partitions int) (map[int32]int64, error) {
	resp, err := LatestRequest(topic, partitions).RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s/%d: %w", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}
