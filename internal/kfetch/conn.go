package kfetch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/segmentio/kafka-go/protocol/listoffsets"
)

// Conn sends read_committed fetches over its own connection to one broker
// and decodes the answer itself, straight from the bytes read off the
// socket into the caller's Results: keys and values are not copied, a
// LogAppendTime batch's records get the broker's append time, NextOffset
// goes past offsets compaction removed at the end of a batch, and the heap
// a fetch holds is the answer's size (plus its decompressed batches) —
// what kafka-go's decoding loses or costs (see the package comment).
//
// One request may carry every partition of a topic the broker leads
// (FetchMany), as the Java consumer and franz-go send them: one answer per
// broker and round instead of one per partition.
//
// A Conn serves one goroutine. After an error other than a partition error
// (kafka.Error), its connection is in an unknown state: Close it and dial
// again; DialLeader also finds a moved leader.
type Conn struct {
	pc           *protocol.Conn // versions negotiated; ListOffsets goes through it
	clientID     string
	cfg          Config
	fetchVersion int16
	corr         int32
	broken       error
	sent         bool          // a fetch is sent and its answer not read
	req          fetch.Request // reused: one topic, its partitions grown to the largest fetch
	raw          []byte        // FetchMany's answer, which its records alias
	one          [1]Part       // Fetch's single partition
}

// Part is one partition of a FetchMany: where to read it, and what came
// back.
type Part struct {
	Partition int
	Offset    int64
	// Res is filled (reset first) with the partition's share of the answer.
	Res *Result
	// Err is the partition's own failure, as Fetch returns it: a partition
	// error of the broker (kafka.NotLeaderForPartition, OffsetOutOfRange
	// with the bounds to reset to, …), or records that do not decode. The
	// other partitions of the answer are unaffected. A partition the
	// answer of a multi-partition fetch leaves out (a broker may stop
	// listing partitions once the answer is full) comes back without
	// records or error, its offsets -1.
	Err error
}

const (
	// minFetchVersion is the first Fetch with an isolation level and the
	// aborted-transaction list.
	minFetchVersion = 4
	// maxFetchVersion is the last Fetch kafka-go encodes (v12 is flexible).
	maxFetchVersion = 11
	// corrBase keeps this Conn's correlation IDs apart from those
	// protocol.Conn.RoundTrip numbers from 1.
	corrBase = 1 << 30
)

func newConn(pc *protocol.Conn, clientID string, fetchVersion int16, cfg Config) *Conn {
	c := &Conn{pc: pc, clientID: clientID, cfg: cfg, fetchVersion: fetchVersion, corr: corrBase}
	c.req = fetch.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(cfg.MaxWait.Milliseconds()),
		MinBytes:       int32(cfg.MinBytes),
		IsolationLevel: isolationReadCommitted,
		SessionEpoch:   -1, // session 0, epoch -1: a full fetch, no fetch session (KIP-227)
		Topics:         []fetch.RequestTopic{{}},
	}
	return c
}

// Close closes the connection.
func (c *Conn) Close() error { return c.pc.Close() }

// Fetch sends one fetch for topic/partition at offset and fills res (reset
// first) with the answer. Errors are as Fetcher.Fetch's, and a partition
// the broker does not lead returns kafka.NotLeaderForPartition (dial the
// leader again). Keys and values alias res and hold until the next fetch
// into it.
func (c *Conn) Fetch(ctx context.Context, topic string, partition int, offset int64, res *Result) error {
	c.one[0] = Part{Partition: partition, Offset: offset, Res: res}
	defer func() { c.one[0] = Part{} }()
	if err := c.fetch(ctx, topic, c.one[:], &res.raw); err != nil {
		return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	return c.one[0].Err
}

// FetchMany sends one fetch for the given partitions of topic, each at its
// Offset, and fills each Part's Res and Err as Fetch would for that
// partition alone. It returns an error only when the request as a whole
// failed — connection, timeout (the Conn is then done), an answer whose
// framing does not decode (it stays usable) — leaving every Res empty; an
// error of the whole answer (v7+) is every Part's Err. Keys and values
// alias the Conn's answer buffer (or a Res's decompressed batches) and
// hold until the next fetch on the Conn.
//
// The answer is bounded by MaxBytes, and by PartitionMaxBytes per
// partition, so it holds at most what as many single fetches would. A
// broker fills the answer in the request's order, so a caller whose
// answers reach MaxBytes rotates the order between fetches (as the Java
// consumer does) for every partition to get its turn.
func (c *Conn) FetchMany(ctx context.Context, topic string, parts []Part) error {
	if c.sent {
		return errors.New("kfetch: a fetch was sent and its answer not received")
	}
	if err := c.fetch(ctx, topic, parts, &c.raw); err != nil {
		return fmt.Errorf("fetch %s (%d partitions): %w", topic, len(parts), err)
	}
	return nil
}

// SendMany is FetchMany's first half: it writes the fetch for parts and
// returns without waiting for the answer, so that the broker works on it
// while the caller hands on the answer before (whose records stay valid:
// nothing is read into the Conn's buffer until ReceiveMany). It leaves
// every Res alone. ReceiveMany, with the same parts, reads the answer; one
// fetch at a time is sent and not yet received.
func (c *Conn) SendMany(ctx context.Context, topic string, parts []Part) error {
	if c.sent {
		return errors.New("kfetch: a fetch was sent and its answer not received")
	}
	if err := c.send(ctx, topic, parts); err != nil {
		return fmt.Errorf("fetch %s (%d partitions): %w", topic, len(parts), err)
	}
	return nil
}

// ReceiveMany is FetchMany's second half: it reads the answer to the fetch
// SendMany sent for parts, and fills each Part as FetchMany does. The
// answer must come within MaxWait + Grace of the call (or by ctx's
// deadline, if sooner): a broker holds a fetch that finds nothing for
// MaxWait from when it reads it, which, behind an answer the caller was
// still reading, may be later than the send.
func (c *Conn) ReceiveMany(ctx context.Context, topic string, parts []Part) error {
	if err := c.receive(ctx, topic, parts, &c.raw); err != nil {
		return fmt.Errorf("fetch %s (%d partitions): %w", topic, len(parts), err)
	}
	return nil
}

// fetch sends the request for parts, reading the answer into *raw.
func (c *Conn) fetch(ctx context.Context, topic string, parts []Part, raw *[]byte) error {
	if err := c.send(ctx, topic, parts); err != nil {
		for i := range parts {
			parts[i].Res.reset(parts[i].Offset)
			parts[i].Err = nil
		}
		return err
	}
	return c.receive(ctx, topic, parts, raw)
}

// send writes the request for parts.
func (c *Conn) send(ctx context.Context, topic string, parts []Part) error {
	if c.broken != nil {
		return fmt.Errorf("connection unusable after %w", c.broken)
	}
	stop := c.watch(ctx)
	defer stop()
	c.corr++
	c.request(topic, parts)
	if err := protocol.WriteRequest(c.pc, c.fetchVersion, c.corr, c.clientID, &c.req); err != nil {
		c.broken = ctxErr(ctx, err)
		return c.broken
	}
	c.sent = true
	return nil
}

// receive reads the answer to the request send wrote for parts into *raw
// and decodes it into parts.
func (c *Conn) receive(ctx context.Context, topic string, parts []Part, raw *[]byte) error {
	for i := range parts {
		parts[i].Res.reset(parts[i].Offset)
		parts[i].Err = nil
	}
	if c.broken != nil {
		return fmt.Errorf("connection unusable after %w", c.broken)
	}
	if !c.sent {
		return errors.New("kfetch: no fetch was sent")
	}
	c.sent = false
	if err := c.read(ctx, raw); err != nil {
		c.broken = err
		return err
	}
	if err := parseFetch(c.fetchVersion, *raw, topic, parts); err != nil {
		// The answer was read whole, so the connection stays usable.
		for i := range parts {
			parts[i].Res.reset(parts[i].Offset)
		}
		return err
	}
	for i := range parts {
		p := &parts[i]
		if p.Err == errLeftOut && len(parts) > 1 {
			// kfake stops listing partitions once the answer is full;
			// the partition had no turn in this one.
			p.Err = nil
		}
		if p.Err == nil {
			continue
		}
		if errors.Is(p.Err, kafka.OffsetOutOfRange) && (p.Res.LogStartOffset < 0 || p.Res.LastStableOffset < 0) {
			if err := c.bounds(ctx, topic, p.Partition, p.Res); err != nil {
				p.Err = fmt.Errorf("%w (log bounds unknown: %w)", p.Err, err)
			}
		}
		p.Err = fmt.Errorf("fetch %s/%d at %d: %w", topic, p.Partition, p.Offset, p.Err)
	}
	return nil
}

// watch bounds the socket's next operation by MaxWait + Grace from now
// (or ctx's deadline, if sooner), and unblocks it at once when ctx is
// cancelled; the func it returns ends the watch. Once a cancel has
// unblocked the socket, the deadline it moved may land on a later
// operation: the Conn is done.
func (c *Conn) watch(ctx context.Context) func() {
	deadline := time.Now().Add(c.cfg.MaxWait + c.cfg.Grace)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.pc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.pc.SetDeadline(time.Unix(1, 0)) })
	return func() {
		if !stop() && c.broken == nil {
			c.broken = ctx.Err()
		}
	}
}

// read reads the answer's body into *raw.
func (c *Conn) read(ctx context.Context, raw *[]byte) error {
	stop := c.watch(ctx)
	defer stop()
	var head [8]byte // size, correlation ID
	if _, err := io.ReadFull(c.pc, head[:]); err != nil {
		return ctxErr(ctx, err)
	}
	size := int(int32(binary.BigEndian.Uint32(head[:4]))) - 4
	if corr := int32(binary.BigEndian.Uint32(head[4:])); corr != c.corr {
		return fmt.Errorf("answer to request %d, want %d", corr, c.corr)
	}
	if size < 0 || size > maxAnswer(c.cfg) {
		return fmt.Errorf("answer of %d bytes", size)
	}
	if cap(*raw) < size {
		*raw = make([]byte, size, max(size, 2*cap(*raw)))
	}
	*raw = (*raw)[:size]
	if _, err := io.ReadFull(c.pc, *raw); err != nil {
		return ctxErr(ctx, err)
	}
	return nil
}

// request fills c.req for parts, reusing its partition list.
func (c *Conn) request(topic string, parts []Part) {
	per := c.cfg.partitionMaxBytes()
	// Each partition's share is bounded by per already; MaxBytes stays
	// whole, as kfake sends the partition that fills the answer without
	// its aborted transactions.
	c.req.MaxBytes = int32(c.cfg.MaxBytes)
	t := &c.req.Topics[0]
	t.Topic = topic
	if cap(t.Partitions) < len(parts) {
		t.Partitions = make([]fetch.RequestPartition, len(parts))
	}
	t.Partitions = t.Partitions[:len(parts)]
	for i := range parts {
		t.Partitions[i] = fetch.RequestPartition{
			Partition:          int32(parts[i].Partition),
			CurrentLeaderEpoch: -1,
			FetchOffset:        parts[i].Offset,
			LogStartOffset:     -1,
			PartitionMaxBytes:  per,
		}
	}
}

// maxAnswer bounds the answer a Conn reads: MaxBytes may be exceeded by a
// single batch larger than it (the broker sends the first batch whole), but
// not by this much unless the stream is corrupt.
func maxAnswer(cfg Config) int { return max(2*cfg.MaxBytes, 256<<20) }

// bounds fills res's LogStartOffset and LastStableOffset with ListOffsets
// (earliest, and latest under read_committed: the last stable offset), one
// request each, as Kafka refuses a partition twice in one.
func (c *Conn) bounds(ctx context.Context, topic string, partition int, res *Result) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.pc.SetDeadline(dl)
	} else {
		_ = c.pc.SetDeadline(time.Now().Add(c.cfg.MaxWait + c.cfg.Grace))
	}
	for _, q := range []struct {
		ts  int64
		out *int64
	}{{kafka.FirstOffset, &res.LogStartOffset}, {kafka.LastOffset, &res.LastStableOffset}} {
		m, err := c.pc.RoundTrip(&listoffsets.Request{
			ReplicaID:      -1,
			IsolationLevel: isolationReadCommitted,
			Topics: []listoffsets.RequestTopic{{Topic: topic, Partitions: []listoffsets.RequestPartition{{
				Partition: int32(partition), CurrentLeaderEpoch: -1, Timestamp: q.ts,
			}}}},
		})
		if err != nil {
			c.broken = err
			return err
		}
		found := false
		for _, t := range m.(*listoffsets.Response).Topics {
			for _, p := range t.Partitions {
				if t.Topic == topic && p.Partition == int32(partition) {
					if p.ErrorCode != 0 {
						return kafka.Error(p.ErrorCode)
					}
					*q.out, found = p.Offset, true
				}
			}
		}
		if !found {
			return errors.New("list offsets: the answer leaves the partition out")
		}
	}
	return nil
}
