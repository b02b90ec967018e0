package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// These tests pin down that the kafka-go APIs flatline relies on work against
// kfake over TCP: a murmur2-partitioned Writer with acks=all, a Reader,
// ListOffsets, and a ConsumerGroup generation committing offsets that
// OffsetFetch reads back.

const partitions = 4

// writer is a kafka-go Writer to topic with acks=all, sending each write at
// once and retrying quickly; it is closed when the test ends.
func writer(t *testing.T, k *testenv.KafkaCluster, topic string) *kafka.Writer {
	w := &kafka.Writer{
		Addr:            kafka.TCP(k.Brokers()...),
		Topic:           topic,
		RequiredAcks:    kafka.RequireAll,
		BatchTimeout:    time.Millisecond,
		WriteBackoffMin: 10 * time.Millisecond,
		WriteBackoffMax: 20 * time.Millisecond,
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func TestKafkaWriterReader(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	k := testenv.Kafka(t, partitions, "signals")

	w := writer(t, k, "signals")
	w.Balancer = &kafka.Murmur2Balancer{}
	const n = 100
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("d-%d", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}

	// Where murmur2 says each key goes (the Java default partitioner).
	all := make([]int, partitions)
	for i := range all {
		all[i] = i
	}
	wantPart := map[string]int{}
	for _, m := range msgs {
		wantPart[string(m.Key)] = (&kafka.Murmur2Balancer{}).Balance(m, all...)
	}

	client := &kafka.Client{Addr: kafka.TCP(k.Brokers()...), Timeout: 10 * time.Second}
	req := map[string][]kafka.OffsetRequest{}
	for p := 0; p < partitions; p++ {
		req["signals"] = append(req["signals"], kafka.LastOffsetOf(p), kafka.FirstOffsetOf(p))
	}
	lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	got := 0
	counts := map[int]int64{}
	for _, po := range lo.Topics["signals"] {
		if po.Error != nil {
			t.Fatalf("list offsets partition %d: %v", po.Partition, po.Error)
		}
		if po.FirstOffset != 0 {
			t.Errorf("partition %d first offset %d, want 0", po.Partition, po.FirstOffset)
		}
		counts[po.Partition] = po.LastOffset
		got += int(po.LastOffset)
	}
	if got != n {
		t.Fatalf("high watermarks sum to %d, want %d (%v)", got, n, counts)
	}

	seen := 0
	for p := 0; p < partitions; p++ {
		if counts[p] == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   k.Brokers(),
			Topic:     "signals",
			Partition: p,
			MaxWait:   50 * time.Millisecond,
		})
		for i := int64(0); i < counts[p]; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read partition %d: %v", p, err)
			}
			if m.Offset != i {
				t.Errorf("partition %d: offset %d, want %d", p, m.Offset, i)
			}
			if wantPart[string(m.Key)] != p {
				t.Errorf("key %s on partition %d, murmur2 says %d", m.Key, p, wantPart[string(m.Key)])
			}
			if m.Time.IsZero() || time.Since(m.Time) > time.Minute {
				t.Errorf("key %s: odd timestamp %v", m.Key, m.Time)
			}
			seen++
		}
		if err := r.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}
	if seen != n {
		t.Fatalf("read %d messages, want %d", seen, n)
	}
}

// groupConfig is a member of consumer group "flatline" on "signals", with
// timeouts short enough that joins and rebalances take a test little time.
func groupConfig(brokers []string) kafka.ConsumerGroupConfig {
	return kafka.ConsumerGroupConfig{
		ID:                "flatline",
		Brokers:           brokers,
		Topics:            []string{"signals"},
		SessionTimeout:    time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout:  time.Second,
		JoinGroupBackoff:  100 * time.Millisecond,
		Timeout:           5 * time.Second,
	}
}

func TestKafkaConsumerGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	k := testenv.Kafka(t, partitions, "signals")

	g, err := kafka.NewConsumerGroup(groupConfig(k.Brokers()))
	if err != nil {
		t.Fatalf("new consumer group: %v", err)
	}
	defer g.Close()

	start := time.Now()
	gen, err := g.Next(ctx)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Logf("consumer group joined in %v (generation %d)", time.Since(start), gen.ID)
	var assigned []int
	for _, a := range gen.Assignments["signals"] {
		assigned = append(assigned, a.ID)
	}
	sort.Ints(assigned)
	if len(assigned) != partitions {
		t.Fatalf("assigned partitions %v, want all %d", assigned, partitions)
	}

	ran := make(chan struct{})
	gen.Start(func(ctx context.Context) {
		close(ran)
		<-ctx.Done()
	})
	<-ran
	commit := map[string]map[int]int64{"signals": {0: 7, 3: 42}}
	if err := gen.CommitOffsets(commit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	client := &kafka.Client{Addr: kafka.TCP(k.Brokers()...), Timeout: 10 * time.Second}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{
		GroupID: "flatline",
		Topics:  map[string][]int{"signals": {0, 1, 2, 3}},
	})
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	if resp.Error != nil {
		t.Fatalf("offset fetch: %v", resp.Error)
	}
	want := map[int]int64{0: 7, 1: -1, 2: -1, 3: 42}
	for _, p := range resp.Topics["signals"] {
		if p.Error != nil {
			t.Errorf("offset fetch partition %d: %v", p.Partition, p.Error)
		}
		if p.CommittedOffset != want[p.Partition] {
			t.Errorf("partition %d committed %d, want %d", p.Partition, p.CommittedOffset, want[p.Partition])
		}
	}
	if len(resp.Topics["signals"]) != partitions {
		t.Errorf("offset fetch returned %d partitions, want %d", len(resp.Topics["signals"]), partitions)
	}

	// A second member joining forces a rebalance: the first generation ends
	// and both members share the partitions in the next one.
	g2, err := kafka.NewConsumerGroup(groupConfig(k.Brokers()))
	if err != nil {
		t.Fatalf("new consumer group 2: %v", err)
	}
	defer g2.Close()
	start = time.Now()
	type res struct {
		gen *kafka.Generation
		err error
	}
	ch2 := make(chan res, 1)
	go func() {
		gen, err := g2.Next(ctx)
		ch2 <- res{gen, err}
	}()
	gen1, err := g.Next(ctx)
	if err != nil {
		t.Fatalf("rejoin member 1: %v", err)
	}
	r2 := <-ch2
	if r2.err != nil {
		t.Fatalf("join member 2: %v", r2.err)
	}
	t.Logf("rebalance to two members took %v", time.Since(start))
	n := len(gen1.Assignments["signals"]) + len(r2.gen.Assignments["signals"])
	if n != partitions || len(gen1.Assignments["signals"]) == 0 || len(r2.gen.Assignments["signals"]) == 0 {
		t.Errorf("assignments after rebalance: %v and %v", gen1.Assignments, r2.gen.Assignments)
	}
}

func TestKafkaUnknownTopicNotCreated(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	k := testenv.Kafka(t, 1, "signals")
	w := writer(t, k, "nope")
	w.AllowAutoTopicCreation = true
	w.MaxAttempts = 2
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("v")})
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		t.Fatalf("write to unknown topic: %v, want UnknownTopicOrPartition", err)
	}
}

func TestKafkaBrokersAreLoopbackTCP(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, 1, "a")
	for _, b := range k.Brokers() {
		host, _, err := net.SplitHostPort(b)
		if err != nil || host != "127.0.0.1" {
			t.Errorf("broker %q is not a 127.0.0.1 host:port", b)
		}
	}
	if k.Cluster() == nil {
		t.Fatal("nil Cluster")
	}
}

// TestKafkaFaults shows how tests inject broker errors through Cluster():
// kafka-go's Writer retries a retriable produce error and surfaces a
// non-retriable one.
func TestKafkaFaults(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 30*time.Second)
	k := testenv.Kafka(t, 1, "events")
	w := writer(t, k, "events")
	msg := kafka.Message{Key: []byte("d-1"), Value: []byte("{}")}

	retriable := k.Cluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: "events", Err: kerr.NotEnoughReplicas, Count: 2,
	})
	if err := w.WriteMessages(ctx, msg); err != nil {
		t.Fatalf("write through 2 retriable faults: %v", err)
	}
	if h := retriable.Hits(); h != 2 {
		t.Errorf("retriable fault answered %d produce requests, want 2", h)
	}

	fatal := k.Cluster().Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: "events", Err: kerr.TopicAuthorizationFailed, Count: -1,
	})
	defer fatal.Remove()
	// kafka-go reports per-message errors as kafka.WriteErrors, which has
	// no Unwrap: errors.Is(err, kafka.TopicAuthorizationFailed) is false on
	// it; look inside with errors.As.
	err := w.WriteMessages(ctx, msg)
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != 1 || !errors.Is(werrs[0], kafka.TopicAuthorizationFailed) {
		t.Fatalf("write with a non-retriable fault: %v, want WriteErrors{TopicAuthorizationFailed}", err)
	}
}
