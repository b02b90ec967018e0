package kafkaconn

import (
	"context"
	"strconv"

	"github.com/segmentio/kafka-go"
)

// DefaultMaxMessageBytes is Kafka's default max.message.bytes, taken when
// the brokers do not say (DescribeConfigs denied).
const DefaultMaxMessageBytes = 1048588

// MaxMessageBytes asks the brokers for topic's max.message.bytes: the
// largest record batch the topic takes. Every produce request flatline sends
// (events, dead letters) stays under it, because a request the broker
// refuses as too large is refused again on every retry.
func MaxMessageBytes(ctx context.Context, client *kafka.Client, topic string) int {
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"max.message.bytes"},
	}}})
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].Error != nil {
		return DefaultMaxMessageBytes
	}
	for _, e := range resp.Resources[0].ConfigEntries {
		if n, err := strconv.Atoi(e.ConfigValue); err == nil && e.ConfigName == "max.message.bytes" && n > 0 {
			return n
		}
	}
	return DefaultMaxMessageBytes
}
