package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// rateProducer sends heartbeats of ids round-robin at rate per second,
// stamped with the wall clock, until stopped.
//
// It stands for a fleet on other machines, yet shares the bench's two
// cores and its process with the bench's Kafka, so it encodes Kafka's
// record batches itself, into buffers it reuses, and sends them as raw
// produce requests: no record object, key copy, value or callback
// allocated per heartbeat, as kgo's producer needs, and every collection
// of the bench process slows the broker flatline reads from
// (docs/performance-history.md).
// Keys are partitioned with murmur2 as kgo's and Java's producers do, so a
// device stays on one partition, in order.
type rateProducer struct {
	sent, failed atomic.Int64
	stop         context.CancelFunc
	done         chan struct{}
}

// rateTick is how often the producer sends what has come due: one produce
// request with a batch per partition.
const rateTick = 5 * time.Millisecond

func startRateProducer(brokers []string, topic string, ids []string, rate int) (*rateProducer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		// Raw produce requests must carry the acks the client is
		// configured with; up to Kafka 3.9's produce version a request
		// names its topic (later ones need the topic's id).
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxVersions(kversion.V3_9_0()),
	)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	partitions, err := topicPartitions(ctx, cl, topic)
	if err != nil {
		cancel()
		cl.Close()
		return nil, err
	}
	enc := newBatchEncoder(topic, ids, partitions)
	p := &rateProducer{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		t := time.NewTicker(rateTick)
		defer t.Stop()
		start := time.Now()
		next := 0
		var due int64
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				// Catch up with the schedule rather than tick by tick, so a
				// late tick or a slow answer does not lower the rate.
				want := int64(now.Sub(start).Seconds() * float64(rate))
				if due == want {
					continue
				}
				enc.reset(now)
				for ; due < want; due++ {
					enc.add(next)
					next++
					if next == len(ids) {
						next = 0
					}
				}
				req, n := enc.request()
				sent, err := produce(ctx, cl, req)
				if err != nil && ctx.Err() != nil {
					return
				}
				p.sent.Add(sent)
				p.failed.Add(n - sent)
			}
		}
	}()
	return p, nil
}

func (p *rateProducer) Stop() {
	p.stop()
	<-p.done
}

// produce sends req and returns how many of its records the broker took.
func produce(ctx context.Context, cl *kgo.Client, req *kmsg.ProduceRequest) (int64, error) {
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	var sent int64
	for i, t := range resp.Topics {
		for j, p := range t.Partitions {
			if p.ErrorCode == 0 {
				sent += int64(binary.BigEndian.Uint32(req.Topics[i].Partitions[j].Records[57:61]))
			}
		}
	}
	return sent, nil
}

// topicPartitions returns how many partitions topic has.
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) == 0 {
		return 0, fmt.Errorf("metadata of topic %s: no partitions", topic)
	}
	return len(resp.Topics[0].Partitions), nil
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// batchEncoder builds a produce request of one record batch (magic 2,
// uncompressed, no producer id) per partition, every record of it stamped
// with the same time, into buffers it keeps from one request to the next.
type batchEncoder struct {
	topic     string
	ids       []string
	partition []int32 // of each id, by murmur2 of its key
	ts        time.Time
	bufs      [][]byte // per partition: the batch being built
	counts    []int32
	scratch   []byte
	req       kmsg.ProduceRequest
}

// batchHeader is the size of a record batch's header, up to its first record.
const batchHeader = 61

func newBatchEncoder(topic string, ids []string, partitions int) *batchEncoder {
	e := &batchEncoder{topic: topic, ids: ids, partition: make([]int32, len(ids)),
		bufs: make([][]byte, partitions), counts: make([]int32, partitions)}
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	var r kgo.Record
	for i, id := range ids {
		r.Key = []byte(id)
		e.partition[i] = int32(part.Partition(&r, partitions))
	}
	return e
}

func (e *batchEncoder) reset(ts time.Time) {
	e.ts = ts
	for p := range e.bufs {
		e.bufs[p] = append(e.bufs[p][:0], make([]byte, batchHeader)...)
		e.counts[p] = 0
	}
}

// add appends id k's heartbeat to its partition's batch.
func (e *batchEncoder) add(k int) {
	id, p := e.ids[k], e.partition[k]
	value := heartbeat(e.scratch[:0], id, e.ts.UnixMilli())
	e.scratch = value
	// A record: length, attributes, timestamp delta, offset delta, key,
	// value, header count; the deltas are 0 and counts[p].
	var body [binary.MaxVarintLen64 * 4]byte
	n := 0
	body[n] = 0 // attributes
	n++
	n += binary.PutVarint(body[n:], 0)
	n += binary.PutVarint(body[n:], int64(e.counts[p]))
	n += binary.PutVarint(body[n:], int64(len(id)))
	size := n + len(id) + varintLen(int64(len(value))) + len(value) + 1
	b := binary.AppendVarint(e.bufs[p], int64(size))
	b = append(b, body[:n]...)
	b = append(b, id...)
	b = binary.AppendVarint(b, int64(len(value)))
	b = append(b, value...)
	b = binary.AppendVarint(b, 0) // headers
	e.bufs[p] = b
	e.counts[p]++
}

// request finishes every partition's batch and returns the request and how
// many records it holds. The request is valid until the next reset.
func (e *batchEncoder) request() (*kmsg.ProduceRequest, int64) {
	e.req = kmsg.ProduceRequest{Acks: 1, TimeoutMillis: 5000}
	t := kmsg.ProduceRequestTopic{Topic: e.topic}
	var total int64
	ms := e.ts.UnixMilli()
	for p, b := range e.bufs {
		n := e.counts[p]
		if n == 0 {
			continue
		}
		total += int64(n)
		be := binary.BigEndian
		be.PutUint64(b[0:], 0)                   // base offset
		be.PutUint32(b[8:], uint32(len(b)-12))   // batch length
		be.PutUint32(b[12:], 0xffffffff)         // partition leader epoch
		b[16] = 2                                // magic
		be.PutUint16(b[21:], 0)                  // attributes
		be.PutUint32(b[23:], uint32(n-1))        // last offset delta
		be.PutUint64(b[27:], uint64(ms))         // base timestamp
		be.PutUint64(b[35:], uint64(ms))         // max timestamp
		be.PutUint64(b[43:], 0xffffffffffffffff) // producer id
		be.PutUint16(b[51:], 0xffff)             // producer epoch
		be.PutUint32(b[53:], 0xffffffff)         // base sequence
		be.PutUint32(b[57:], uint32(n))          // records
		be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
		t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: int32(p), Records: b})
	}
	e.req.Topics = append(e.req.Topics, t)
	return &e.req, total
}

// varintLen is the length of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for ; u >= 0x80; u >>= 7 {
		n++
	}
	return n
}
