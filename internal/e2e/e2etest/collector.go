package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// Received is one event read back from the timeouts topic.
type Received struct {
	Key       string
	Partition int
	Offset    int64
	Ev        dispatch.Event
	At        time.Time // when the collector read it
}

// Collector reads every partition of a topic of events from the start,
// with franz-go's client (independent of the kafka-go code flatline
// produces with), riding out broker errors (it reads through the Kafka
// outage test). A test looks at what it read as a whole (ByDevice,
// CountDevices) or in order (Next).
type Collector struct {
	brokers    []string
	topic      string
	partitions int
	next       []atomic.Int64 // per partition, the offset after the last read

	mu     sync.Mutex
	events []Received
	storms []Received    // storm_started and storm_ended events
	cursor int           // of Next
	more   chan struct{} // closed (and replaced) at each event
	bad    []string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Collect starts reading topic. An undecodable event fails the test.
func Collect(t testing.TB, brokers []string, topic string, partitions int) *Collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Collector{
		brokers: brokers, topic: topic, partitions: partitions, next: make([]atomic.Int64, partitions),
		more: make(chan struct{}), cancel: cancel,
	}
	from := make(map[int32]kgo.Offset, partitions)
	for p := 0; p < partitions; p++ {
		from[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
	)
	if err != nil {
		cancel()
		t.Fatalf("collector for %s: %v", topic, err)
	}
	c.wg.Add(1)
	go c.read(ctx, cl)
	t.Cleanup(func() {
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range c.bad {
			t.Errorf("undecodable event: %s", b)
		}
	})
	return c
}

func (c *Collector) read(ctx context.Context, cl *kgo.Client) {
	defer c.wg.Done()
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		// Broker errors (the Kafka outage test injects them): the client
		// keeps its offsets and fetches again.
		fs.EachRecord(c.take)
	}
}

// take keeps one record read.
func (c *Collector) take(m *kgo.Record) {
	p := int(m.Partition)
	var ev dispatch.Event
	c.mu.Lock()
	if err := json.Unmarshal(m.Value, &ev); err != nil {
		c.bad = append(c.bad, fmt.Sprintf("partition %d offset %d: %q: %v", p, m.Offset, m.Value, err))
	} else if strings.HasPrefix(ev.Type, "storm_") {
		// storm_started and storm_ended name no device: kept apart, so
		// the device events read as before (Storms).
		c.storms = append(c.storms, Received{Key: string(m.Key), Partition: p, Offset: m.Offset, Ev: ev, At: time.Now()})
	} else {
		c.events = append(c.events, Received{Key: string(m.Key), Partition: p, Offset: m.Offset, Ev: ev, At: time.Now()})
		close(c.more)
		c.more = make(chan struct{})
	}
	c.mu.Unlock()
	if p < len(c.next) {
		c.next[p].Store(m.Offset + 1)
	}
}

// Behind says, per partition, where the collector has read to and where
// the topic ends: whether events a test waits for are in Kafka unread, or
// were never produced.
func (c *Collector) Behind() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	reqs := make([]kafka.OffsetRequest, c.partitions)
	for p := range reqs {
		reqs[p] = kafka.LastOffsetOf(p)
	}
	client := &kafka.Client{Addr: kafka.TCP(c.brokers...)}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{c.topic: reqs}})
	if err != nil {
		return fmt.Sprintf("%s: cannot list offsets: %v", c.topic, err)
	}
	end := make(map[int]int64)
	for _, po := range resp.Topics[c.topic] {
		end[po.Partition] = po.LastOffset
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s read/end by partition:", c.topic)
	for p := 0; p < c.partitions; p++ {
		fmt.Fprintf(&b, " %d:%d/%d", p, c.next[p].Load(), end[p])
	}
	return b.String()
}

// Storms returns the storm_started and storm_ended events read so far.
func (c *Collector) Storms() []Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Received(nil), c.storms...)
}

// ByDevice returns the events read so far, per device.
func (c *Collector) ByDevice() map[string][]Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]Received)
	for _, r := range c.events {
		out[r.Ev.DeviceID] = append(out[r.Ev.DeviceID], r)
	}
	return out
}

// CountDevices returns how many of ids have at least one event.
func (c *Collector) CountDevices(ids []string) int {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[string]bool)
	for _, r := range c.events {
		if want[r.Ev.DeviceID] {
			seen[r.Ev.DeviceID] = true
		}
	}
	return len(seen)
}

// Next returns the next event in the order they were read, waiting up to
// timeout for one; ok is false when none came.
func (c *Collector) Next(timeout time.Duration) (r Received, ok bool) {
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	for {
		c.mu.Lock()
		if c.cursor < len(c.events) {
			r = c.events[c.cursor]
			c.cursor++
			c.mu.Unlock()
			return r, true
		}
		more := c.more
		c.mu.Unlock()
		select {
		case <-more:
		case <-limit.C:
			return Received{}, false
		}
	}
}

// Unread counts the events read but not yet returned by Next.
func (c *Collector) Unread() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events) - c.cursor
}

// Drain waits until the collector has read every event the topic holds
// now.
func (c *Collector) Drain(t testing.TB) {
	t.Helper()
	end := testenv.EndOffsets(t, c.brokers, c.topic, c.partitions)
	Eventually(t, 30*time.Second, "the collector to read the whole "+c.topic+" topic", func() bool {
		for p, off := range end {
			if c.next[p].Load() < off {
				return false
			}
		}
		return true
	})
}
