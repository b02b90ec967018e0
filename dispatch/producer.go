package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceapi "github.com/segmentio/kafka-go/protocol/produce"
	"github.com/segmentio/kafka-go/protocol/rawproduce"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
)

// producer writes the records of one topic with at most one produce request
// per partition leader in flight. Callers queue their messages; the sender
// takes everything queued, partitions it (murmur2 of the key, as Kafka's
// Java client), and sends each leader one request holding all of its
// partitions. While a request is out the next one fills, so batches grow
// with the load and nothing waits for a timer. kafka-go's Writer is not
// used because it looks up metadata on every call and starts a goroutine, a
// timer and a preallocated batch for every partition a call touches.
type producer struct {
	// transport makes a kafka-go Transport. A new one replaces the
	// client's after an answer says the leaders moved: a Transport routes
	// every request, metadata requests included, by a cluster view it
	// refreshes only every MetadataTTL (6 s), so the old one would send
	// to the old leader, and read the old leaders back, until then.
	transport func() (*kafka.Transport, error)
	client    *kafka.Client
	addr      net.Addr
	topic     string
	linger    time.Duration
	codec     kafka.Compression // kafka.compression; 0: none
	balancer  kafka.Murmur2Balancer

	mu     sync.Mutex
	queue  []*send
	closed bool
	wake   chan struct{}
	done   chan struct{}

	// meta is the topic's partition leaders, refreshed when older than
	// metaTTL or after a request failed.
	meta   []int32 // partition → leader broker id
	metaAt time.Time
	parts  []int // 0 … len(meta)-1, for the balancer
	// maxBytes is the topic's max.message.bytes, read with the leaders:
	// the largest record batch the brokers take for one partition.
	maxBytes int
}

// send is one caller's messages and, once done is closed, their outcome:
// err for all of them, or errs per message.
type send struct {
	msgs []kafka.Message
	errs []error
	err  error
	done chan struct{}
}

const (
	// metaTTL bounds how long partition leaders are trusted.
	metaTTL = 10 * time.Second
	// produceTimeout is how long the broker may take to acknowledge.
	produceTimeout = 10 * time.Second
)

// newProducer starts a producer to topic. linger > 0 makes the sender wait
// that long after the first queued message before it takes the queue;
// codec compresses every batch (0: none).
func newProducer(brokers []string, topic string, transport func() (*kafka.Transport, error), linger time.Duration, codec kafka.Compression) (*producer, error) {
	tr, err := transport()
	if err != nil {
		return nil, err
	}
	addr := kafka.TCP(brokers...)
	p := &producer{
		transport: transport,
		client:    &kafka.Client{Addr: addr, Transport: tr, Timeout: produceTimeout + 5*time.Second},
		addr:      addr, topic: topic, linger: linger, codec: codec,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	go p.run()
	return p, nil
}

// Send queues msgs and waits until every one is acknowledged or failed.
// It returns nil, kafka.WriteErrors (one per message, nil for those
// written), errClosed after Close, another error for all of them, or ctx's
// error — in which case the messages may still be written: the caller must
// not reuse them.
func (p *producer) Send(ctx context.Context, msgs []kafka.Message) error {
	s := &send{msgs: msgs, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errClosed
	}
	p.queue = append(p.queue, s)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.err != nil {
		return s.err
	}
	for _, e := range s.errs {
		if e != nil {
			return kafka.WriteErrors(s.errs)
		}
	}
	return nil
}

// Close sends what is queued and stops the sender.
func (p *producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	<-p.done
	kafkaconn.CloseClient(p.client)
}

func (p *producer) run() {
	defer close(p.done)
	for {
		<-p.wake
		if p.linger > 0 {
			time.Sleep(p.linger)
		}
		for {
			p.mu.Lock()
			batch, closed := p.queue, p.closed
			p.queue = nil
			p.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			p.round(batch)
		}
	}
}

// ref is one message of a send.
type ref struct {
	s *send
	i int
}

// round sends everything queued: one request per leader, all at once, and
// completes every send.
func (p *producer) round(batch []*send) {
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeout+5*time.Second)
	defer cancel()
	for _, s := range batch {
		s.errs = make([]error, len(s.msgs))
	}
	defer func() {
		for _, s := range batch {
			close(s.done)
		}
	}()
	if err := p.refresh(ctx); err != nil {
		for _, s := range batch {
			s.err = err
		}
		return
	}
	// leader → partition → messages, in queue order.
	byLeader := make(map[int32]map[int][]ref)
	for _, s := range batch {
		for i := range s.msgs {
			part := p.balancer.Balance(s.msgs[i], p.parts...)
			leader := p.meta[part]
			if byLeader[leader] == nil {
				byLeader[leader] = make(map[int][]ref)
			}
			byLeader[leader][part] = append(byLeader[leader][part], ref{s, i})
		}
	}
	var wg sync.WaitGroup
	var stale atomic.Bool
	for _, parts := range byLeader {
		wg.Add(1)
		go func(parts map[int][]ref) {
			defer wg.Done()
			// A partition's messages beyond one batch's bytes go in
			// the next request to the same leader, in order.
			for _, wave := range waves(parts, p.maxBytes-batchOverhead) {
				if p.produce(ctx, wave) {
					stale.Store(true)
				}
			}
		}(parts)
	}
	wg.Wait()
	if stale.Load() {
		p.renew()
	}
}

// batchOverhead is what a record batch and its log entry add to the
// records: the v2 batch header (61 bytes) and the offset and size before
// it (12), rounded up.
const batchOverhead = 100

// recordSize bounds the bytes one message takes in a v2 record batch,
// uncompressed: its key, value and headers, and per record at most 30 bytes
// of lengths, attributes, timestamp and offset deltas.
func recordSize(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value) + 30
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

// waves splits each partition's messages into runs whose batches stay
// within budget bytes: the first run of every partition is the first wave,
// and so on. A message larger than budget alone is a run (the broker
// refuses it, and says so).
func waves(parts map[int][]ref, budget int) []map[int][]ref {
	var out []map[int][]ref
	for part, refs := range parts {
		w, size := 0, 0
		for _, r := range refs {
			n := recordSize(&r.s.msgs[r.i])
			if size > 0 && size+n > budget {
				w, size = w+1, 0
			}
			if w == len(out) {
				out = append(out, map[int][]ref{})
			}
			out[w][part] = append(out[w][part], r)
			size += n
		}
	}
	return out
}

// renew forgets the partition leaders and the Transport's view of the
// cluster, so the next round reads both afresh from a broker.
func (p *producer) renew() {
	p.metaAt = time.Time{}
	tr, err := p.transport()
	if err != nil {
		return // the same settings built the first one; keep it
	}
	kafkaconn.CloseClient(p.client)
	p.client.Transport = tr
}

// produce sends one request for parts (all led by one broker), records each
// message's outcome and reports whether the leaders may have moved.
func (p *producer) produce(ctx context.Context, parts map[int][]ref) (stale bool) {
	fail := func(part int, err error) {
		for _, r := range parts[part] {
			r.s.errs[r.i] = err
		}
	}
	req, err := p.request(parts)
	if err != nil {
		for part := range parts {
			fail(part, fmt.Errorf("produce to %s: %w", p.topic, err))
		}
		return false
	}
	// A rawproduce request is a produce request (same API key, and the
	// transport routes it to the partitions' leader the same way) whose
	// record sets are written as they are; its answer is produce's.
	resp, err := p.client.Transport.RoundTrip(ctx, p.addr, req)
	if err != nil {
		for part := range parts {
			fail(part, fmt.Errorf("produce to %s: %w", p.topic, err))
		}
		return true
	}
	release(req)
	answered := make(map[int]bool, len(parts))
	for _, t := range resp.(*produceapi.Response).Topics {
		for _, rp := range t.Partitions {
			part := int(rp.Partition)
			answered[part] = true
			if rp.ErrorCode != 0 {
				e := kafka.Error(rp.ErrorCode)
				fail(part, e)
				stale = stale || errors.Is(e, kafka.NotLeaderForPartition) || errors.Is(e, kafka.UnknownTopicOrPartition) || errors.Is(e, kafka.LeaderNotAvailable)
			}
		}
	}
	for part := range parts {
		if !answered[part] {
			fail(part, fmt.Errorf("produce to %s: partition %d not in the answer", p.topic, part))
		}
	}
	return stale
}

// request is the produce request for parts, each partition's records
// encoded into a pooled recordSet.
func (p *producer) request(parts map[int][]ref) (*rawproduce.Request, error) {
	topic := rawproduce.RequestTopic{Topic: p.topic, Partitions: make([]rawproduce.RequestPartition, 0, len(parts))}
	for part, refs := range parts {
		rs := recordSets.Get().(*recordSet)
		if err := rs.encode(refs, p.codec); err != nil {
			recordSets.Put(rs)
			return nil, fmt.Errorf("partition %d: %w", part, err)
		}
		topic.Partitions = append(topic.Partitions, rawproduce.RequestPartition{
			Partition: int32(part), RecordSet: protocol.RawRecordSet{Reader: rs},
		})
	}
	return &rawproduce.Request{
		Acks: int16(kafka.RequireAll), Timeout: int32(produceTimeout.Milliseconds()),
		Topics: []rawproduce.RequestTopic{topic},
	}, nil
}

// release puts req's record sets back in the pool. Only once the broker
// answered: after an error (a timeout) the transport may still be writing
// them.
func release(req *rawproduce.Request) {
	for _, t := range req.Topics {
		for _, pt := range t.Partitions {
			recordSets.Put(pt.RecordSet.Reader.(*recordSet))
		}
	}
}

// refresh reads the topic's partition leaders when they are older than
// metaTTL or a request failed (metaAt zeroed).
func (p *producer) refresh(ctx context.Context) error {
	if p.meta != nil && time.Since(p.metaAt) < metaTTL {
		return nil
	}
	md, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.topic}})
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", p.topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		var terr error = kafka.UnknownTopicOrPartition
		if len(md.Topics) == 1 {
			terr = md.Topics[0].Error
		}
		return fmt.Errorf("metadata of %s: %w", p.topic, terr)
	}
	ps := md.Topics[0].Partitions
	meta := make([]int32, len(ps))
	for _, part := range ps {
		if part.ID < 0 || part.ID >= len(ps) {
			return fmt.Errorf("metadata of %s: partition %d of %d", p.topic, part.ID, len(ps))
		}
		meta[part.ID] = int32(part.Leader.ID)
	}
	p.maxBytes = max(kafkaconn.MaxMessageBytes(ctx, p.client, p.topic), 2*batchOverhead)
	p.meta, p.metaAt = meta, time.Now()
	p.parts = p.parts[:0]
	for i := range meta {
		p.parts = append(p.parts, i)
	}
	return nil
}
