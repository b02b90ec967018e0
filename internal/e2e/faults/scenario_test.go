package faults_test

import (
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// outageScenario is the load of the Redis and the Kafka outage tests: 1,000
// devices beating every 500 ms with a 3 s timeout, 100 of them going silent
// before, during and after the outage, on 4 partitions and 8 shards.
var outageScenario = e2etest.Scenario{
	Devices:    1000,
	Silent:     100,
	Interval:   500 * time.Millisecond,
	Timeout:    3 * time.Second,
	Partitions: 4,
	Shards:     8,
}

// metadataRefreshing is a fleet's producer that refreshes its metadata
// every 100 ms, as a producer told NOT_LEADER would, so that it follows a
// leader move or a new partition count within moments.
func metadataRefreshing(brokers []string) *kafka.Writer {
	w := e2etest.NewWriter(brokers, e2etest.Signals)
	w.Transport = &kafka.Transport{MetadataTTL: 100 * time.Millisecond}
	return w
}
