package testenv

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaCluster is an in-process Kafka (kfake) listening on loopback TCP,
// reachable by any Kafka client, kafka-go included.
type KafkaCluster struct {
	c *kfake.Cluster
}

// Kafka starts a single-broker kfake cluster on a free 127.0.0.1 port with
// topics pre-created with the given number of partitions, and closes it in
// t.Cleanup. Topics are not auto-created: a test producing to an unknown topic
// gets UNKNOWN_TOPIC_OR_PARTITION, as against a production cluster.
//
// A node removed with Cluster().RemoveNode drops its clients' connections,
// as a Kafka broker that stops does.
//
// The group session timeout may be as low as 100ms (Kafka's and kfake's
// default minimum is 6s), so tests of a dead ingest instance do not wait
// seconds for its partitions to move.
func Kafka(t testing.TB, partitions int, topics ...string) *KafkaCluster {
	t.Helper()
	return KafkaWith(t, nil, partitions, topics...)
}

// KafkaWith is Kafka with more kfake options, such as broker configs
// (kfake.BrokerConfigs(map[string]string{"message.max.bytes": ...})).
func KafkaWith(t testing.TB, opts []kfake.Opt, partitions int, topics ...string) *KafkaCluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), topics...),
		// The floor goes through the broker config too, so DescribeConfigs
		// reports what the broker enforces (flatline checks
		// kafka.session_timeout against it at start-up).
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"group.min.session.timeout.ms": "100",
			// 1 MiB segments, as the demo's Kafka: kfake grows a
			// segment by copying it whole (see demo.SegmentBytes).
			"log.segment.bytes": "1048576",
		}),
		// A removed node drops its clients' connections, as a stopped
		// broker does (stoppingListener).
		kfake.ListenFn(listenStopping),
	}, opts...)...)
	if err != nil {
		t.Fatalf("testenv: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &KafkaCluster{c: c}
}

// Brokers are the bootstrap addresses (host:port) of the cluster.
func (k *KafkaCluster) Brokers() []string { return k.c.ListenAddrs() }

// Cluster is the underlying kfake cluster, for tests that inject faults with
// ControlKey or inspect it.
func (k *KafkaCluster) Cluster() *kfake.Cluster { return k.c }
