package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The soak's own Kafka clients are franz-go (kgo), not the kafka-go that
// flatline uses: the producer of the fleet and the reader of the timeouts
// topic must not share a client library's bugs with what they check.

// setRetention sets topic's retention.ms.
func setRetention(ctx context.Context, brokers []string, topic string, d time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = "retention.ms"
	c.Op = kmsg.IncrementalAlterConfigOpSet
	c.Value = kmsg.StringPtr(strconv.FormatInt(d.Milliseconds(), 10))
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("set %s retention.ms: %w", topic, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("set %s retention.ms: %w", topic, err)
		}
	}
	return nil
}
