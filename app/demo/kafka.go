// Package demo is `flatline dev`, the zero-setup demo: it starts an
// embedded Kafka (franz-go's kfake) and a Redis, both on free loopback ports
// and both gone when the demo ends, runs one flatline instance against them
// and a simulated fleet into it. It is a root that runs the serve
// composition root (package app), which never imports it, so serving never
// links the demo's infrastructure. Unlike internal/testenv it does not
// depend on package testing; the benchmark starts its infrastructure with
// it too.
//
// Files: dev.go (RunDev), kafka.go and redis.go (the embedded Kafka and
// the Redis, with proc_*.go, which ties a child process's life to the
// demo's), shapes.go (how flatline reads a fleet of another shape).
package demo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// SegmentBytes is the log.segment.bytes every embedded Kafka of the project
// runs with (the demo's, the tests' and the benchmarks'). kfake keeps a
// partition's log in in-memory segment files that grow by doubling, each
// growth copying all the segment holds, up to log.segment.bytes — 100 MiB
// by default. Under 100,000 records/s that is one copy of tens of MiB in a
// single memmove, which the Go runtime cannot preempt: a garbage collection
// that starts meanwhile waits for it with every goroutine stopped, and the
// broker answers nothing for tens of milliseconds. Kafka appends to the page
// cache and has no such pause. At 1 MiB no copy exceeds 1 MiB.
const SegmentBytes = 1 << 20

// StartKafka starts an in-process single-broker Kafka on a free 127.0.0.1
// port with topics created with the given number of partitions (other topics
// are not auto-created). stop closes it; call it after every client is done.
func StartKafka(ctx context.Context, partitions int, topics ...string) (brokers []string, stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if partitions < 1 {
		return nil, nil, fmt.Errorf("start kafka: partitions must be at least 1, got %d", partitions)
	}
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), topics...),
		// Let a demo run with a short kafka.session_timeout; Kafka's
		// default floor is 6s.
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{
			"group.min.session.timeout.ms": "100",
			"log.segment.bytes":            strconv.Itoa(SegmentBytes),
		}),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("start kafka: %w", err)
	}
	return c.ListenAddrs(), c.Close, nil
}
