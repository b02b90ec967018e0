package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/bench/internal/offsets"
)

// The load side talks to Kafka with franz-go (kgo): it is the fastest Go
// client, so the generators cost the shared CPU as little as possible.
// flatline itself uses kafka-go, as in production.

func newProducer(brokers []string, topic string) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		// Keyed records are partitioned with murmur2, like Java clients
		// and the device fleets flatline serves: a device stays on one
		// partition, in order.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<17),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(2*time.Millisecond),
	)
}

// heartbeat appends a JSON heartbeat as simulate sends it.
func heartbeat(dst []byte, id string, tsMs int64) []byte {
	dst = append(dst, `{"device_id":"`...)
	dst = append(dst, id...)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, tsMs, 10)
	return append(dst, '}')
}

// preload writes rounds beats of every device to topic, round after round
// as a fleet beating every period would have sent them: device d's beat k
// is at base + k*period + d*period/devices (record timestamp = ts). It
// returns the end offset of every partition.
func preload(ctx context.Context, brokers []string, topic string, ids []string, rounds int, base time.Time, period time.Duration) (map[int]int64, error) {
	return preloadShaped(ctx, brokers, topic, ids, rounds, base, period, nativeRecord)
}

// nativeRecord is device id's heartbeat at at in flatline's own shape.
func nativeRecord(id string, at time.Time) *kgo.Record {
	return &kgo.Record{Key: []byte(id), Value: heartbeat(make([]byte, 0, 48), id, at.UnixMilli()), Timestamp: at}
}

// preloadShaped is preload writing each heartbeat with record.
func preloadShaped(ctx context.Context, brokers []string, topic string, ids []string, rounds int, base time.Time, period time.Duration, record func(id string, at time.Time) *kgo.Record) (map[int]int64, error) {
	cl, err := newProducer(brokers, topic)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var mu sync.Mutex
	ends := map[int]int64{}
	var firstErr atomic.Value
	n := len(ids)
	for k := 0; k < rounds; k++ {
		for d, id := range ids {
			at := base.Add(time.Duration(k)*period + time.Duration(int64(d)*int64(period)/int64(n)))
			rec := record(id, at)
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				mu.Lock()
				if r.Offset+1 > ends[int(r.Partition)] {
					ends[int(r.Partition)] = r.Offset + 1
				}
				mu.Unlock()
			})
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	if e, ok := firstErr.Load().(error); ok && e != nil {
		return nil, fmt.Errorf("preload: %w", e)
	}
	return ends, nil
}

// arrival is one record of the timeouts topic as the test consumer saw it.
type arrival struct {
	key       []byte // valid during the callback only
	value     []byte
	timestamp time.Time // the record timestamp: detected_at_ms
	at        time.Time // when the consumer received it
}

// consumer reads every partition of a topic from the start and hands each
// record to fn, from one goroutine.
type consumer struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startConsumer(brokers []string, topic string, fn func(arrival)) (*consumer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxBytes(32<<20),
		kgo.FetchMaxPartitionBytes(8<<20),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				fn(arrival{key: r.Key, value: r.Value, timestamp: r.Timestamp, at: now})
			})
		}
	}()
	return c, nil
}

func (c *consumer) Stop() {
	c.stop()
	<-c.done
	c.cl.Close()
}

// groupCommitted returns the committed offsets of group on topic.
func groupCommitted(ctx context.Context, brokers []string, group, topic string, partitions int) (map[int]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	parts := make([]int, partitions)
	for i := range parts {
		parts[i] = i
	}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error == nil {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out, nil
}

// sampleBrokerRTT times a ListOffsets of every partition of topic every
// period, on a client of its own, until stop closes; the channel then
// yields the round trips in milliseconds.
func sampleBrokerRTT(brokers []string, topic string, partitions int, period time.Duration, stop <-chan struct{}) (<-chan []float64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	out := make(chan []float64, 1)
	go func() {
		defer cl.Close()
		var rtts []float64
		defer func() { out <- rtts }()
		req := offsets.LatestRequest(topic, partitions)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			_, err := req.RequestWith(ctx, cl)
			cancel()
			if err == nil {
				rtts = append(rtts, float64(time.Since(start).Microseconds())/1e3)
			}
		}
	}()
	return out, nil
}
