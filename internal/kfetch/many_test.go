package kfetch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/fetch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// One request for several partitions decodes each partition's section
// into its own Result, as a fetch of that partition alone would: aborted
// transactions of one partition do not drop another's records of the same
// producer, and a partition's error leaves the others' records whole.
func TestParseFetchKeepsEachPartitionApart(t *testing.T) {
	t.Parallel()
	const a = 7 // a transactional producer writing to partitions 0 and 2
	p0 := answer{
		aborted: []fetch.ResponseTransaction{{ProducerID: a, FirstOffset: 1}},
		batches: []rawBatch{
			{base: 0, records: plainRecords(0)},
			{base: 1, attrs: attrTransactional, producerID: a, records: plainRecords(0, 1)}, // aborted
			{base: 3, attrs: attrTransactional | attrControl, producerID: a, records: []rawRecord{marker(0)}},
			{base: 4, records: plainRecords(0)},
		},
	}
	p2 := answer{ // the same producer, committed here: not aborted by p0's list
		batches: []rawBatch{
			{base: 10, attrs: attrTransactional, producerID: a, records: plainRecords(0, 1)},
			{base: 12, attrs: attrTransactional | attrControl, producerID: a, records: []rawRecord{marker(1)}},
		},
	}
	// Out of the request's order, partition 1 with an error, partition 3
	// left out.
	raw := fetchAnswerV11Parts("t",
		partAnswer{partition: 2, answer: p2},
		partAnswer{partition: 1, code: int16(kafka.NotLeaderForPartition)},
		partAnswer{partition: 0, answer: p0})
	parts := make([]Part, 4)
	for i := range parts {
		parts[i] = Part{Partition: i, Offset: []int64{0, 0, 11, 0}[i], Res: new(Result)}
		parts[i].Res.reset(parts[i].Offset)
	}
	if err := parseFetch(11, raw, "t", parts); err != nil {
		t.Fatal(err)
	}
	offsets := func(r *Result) (out []int64) {
		for _, rec := range r.Records {
			out = append(out, rec.Offset)
		}
		return out
	}
	for _, tc := range []struct {
		partition int
		err       error
		offsets   []int64
		next      int64
	}{
		{0, nil, []int64{0, 4}, 5},
		{1, kafka.NotLeaderForPartition, nil, 0},
		{2, nil, []int64{11}, 13},
		{3, errLeftOut, nil, 0}, // parseFetch says so; FetchMany makes it no error
	} {
		p := parts[tc.partition]
		if !errors.Is(p.Err, tc.err) || (tc.err == nil) != (p.Err == nil) {
			t.Errorf("partition %d: error %v, want %v", tc.partition, p.Err, tc.err)
		}
		if got := offsets(p.Res); !equalOffsets(got, tc.offsets) || p.Res.NextOffset != tc.next {
			t.Errorf("partition %d: offsets %v, NextOffset %d; want %v, %d", tc.partition, got, p.Res.NextOffset, tc.offsets, tc.next)
		}
	}
}

func equalOffsets(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FetchMany against a broker leading three of a topic's partitions, with
// transactions spanning partitions (one aborted across 0 and 1, one
// committed across 1 and 2): each partition reads exactly its committed
// and plain records, whether the log comes whole or a batch per partition
// per round; a partition another broker leads and one that does not exist
// fail on their own (NotLeaderForPartition, UnknownTopicOrPartition), and
// the others read on, on the same connection. Leaders names each
// partition's broker.
func TestFetchManyReadsEachPartitionAsAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"whole log per fetch", func(*Config) {}},
		{"one batch per partition per fetch", func(c *Config) { c.PartitionMaxBytes = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const topic = "signals"
			k := testenv.KafkaWith(t, []kfake.Opt{kfake.NumBrokers(2)}, 4, topic)
			c := k.Cluster()
			for p := range int32(3) {
				if err := c.MoveTopicPartition(topic, p, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.MoveTopicPartition(topic, 3, 1); err != nil {
				t.Fatal(err)
			}
			leaders, err := Leaders(context.Background(), &kafka.Dialer{Timeout: 10 * time.Second}, k.Brokers(), topic)
			if b := k.Brokers(); err != nil || len(leaders) != 4 || leaders[0] != b[0] || leaders[1] != b[0] || leaders[2] != b[0] || leaders[3] != b[1] {
				t.Fatalf("leaders %v (%v); want 0-2 on %s, 3 on %s", leaders, err, b[0], b[1])
			}
			r := &rig{kafka: k, tr: &kafka.Transport{}}
			t.Cleanup(r.tr.CloseIdleConnections)
			plain := r.producer(t, topic)
			txA := r.producer(t, topic, kgo.TransactionalID("a-"+t.Name()))
			txB := r.producer(t, topic, kgo.TransactionalID("b-"+t.Name()))
			put := func(cl *kgo.Client, p int32, vs ...string) {
				t.Helper()
				for _, rec := range values(vs...) {
					rec.Partition = p
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := cl.ProduceSync(ctx, rec).FirstErr()
					cancel()
					if err != nil {
						t.Fatalf("produce to %d: %v", p, err)
					}
				}
			}
			put(plain, 0, "0-p0")
			end := txn(t, txA)
			put(txA, 0, "0-x1")
			put(txA, 1, "1-x1")
			put(plain, 1, "1-p1")
			endB := txn(t, txB)
			put(txB, 1, "1-c2")
			put(txB, 2, "2-c2")
			end(abort)
			put(plain, 2, "2-p2")
			endB(commit)
			end = txn(t, txA)
			put(txA, 0, "0-c3")
			put(txA, 2, "2-c3")
			end(commit)
			endB = txn(t, txB)
			put(txB, 2, "2-x4")
			endB(abort)
			want := [][]string{{"0-p0", "0-c3"}, {"1-p1", "1-c2"}, {"2-c2", "2-p2", "2-c3"}}

			cfg := DefaultConfig()
			tc.cfg(&cfg)
			conn, err := Dial(context.Background(), &kafka.Dialer{Timeout: 10 * time.Second}, k.Brokers()[0], cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The failing partitions first: kfake leaves out the
			// partitions after the answer is full.
			parts := make([]Part, 5)
			for i, p := range []int{3, 9, 0, 1, 2} {
				parts[i] = Part{Partition: p, Res: new(Result)}
			}
			read := make([][]got, 3)
			for round := 0; ; round++ {
				if round == 1000 {
					t.Fatalf("no end after 1000 rounds: %v", read)
				}
				if err := conn.FetchMany(context.Background(), topic, parts); err != nil {
					t.Fatal(err)
				}
				if !errors.Is(parts[0].Err, kafka.NotLeaderForPartition) || !errors.Is(parts[1].Err, kafka.UnknownTopicOrPartition) {
					t.Fatalf("round %d: partition 3 %v, partition 9 %v; want NotLeaderForPartition, UnknownTopicOrPartition",
						round, parts[0].Err, parts[1].Err)
				}
				done := true
				for i := range 3 {
					p := &parts[2+i]
					if p.Err != nil {
						t.Fatalf("round %d, partition %d: %v", round, p.Partition, p.Err)
					}
					for _, rec := range p.Res.Records {
						if rec.Offset < p.Offset {
							t.Fatalf("partition %d: record at %d from a fetch at %d", p.Partition, rec.Offset, p.Offset)
						}
					}
					read[i] = copyRecords(read[i], p.Res.Records)
					p.Offset = p.Res.NextOffset
					// A partition left out of a full answer has no offsets.
					done = done && p.Res.HighWatermark >= 0 && p.Offset >= p.Res.LastStableOffset &&
						p.Res.LastStableOffset == p.Res.HighWatermark
				}
				if done {
					break
				}
			}
			for i := range 3 {
				checkValues(t, "partition "+want[i][0][:1], read[i], want[i])
				// The independent check: each partition alone, through
				// Fetch on its own connection.
				for name, f := range r.paths(t, cfg) {
					alone, _ := readPartition(t, f, topic, i, 0)
					checkValues(t, "partition "+want[i][0][:1]+" alone through "+name, alone, want[i])
				}
			}
		})
	}
}

// A fetch sent ahead (SendMany) is answered by the ReceiveMany that
// follows, with what FetchMany would have read; one fetch at a time is
// sent and not received, and a call out of that order is refused without
// spoiling the connection.
func TestSendManyThenReceiveManyIsFetchMany(t *testing.T) {
	t.Parallel()
	const topic = "signals"
	k := testenv.Kafka(t, 1, topic)
	r := &rig{kafka: k, tr: &kafka.Transport{}}
	t.Cleanup(r.tr.CloseIdleConnections)
	cl := r.producer(t, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, values("a", "b", "c")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, &kafka.Dialer{Timeout: 10 * time.Second}, k.Brokers()[0], DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts := []Part{{Partition: 0, Offset: 1, Res: new(Result)}}
	if err := c.ReceiveMany(ctx, topic, parts); err == nil {
		t.Fatal("ReceiveMany with no fetch sent: no error")
	}
	if err := c.SendMany(ctx, topic, parts); err != nil {
		t.Fatal(err)
	}
	if err := c.SendMany(ctx, topic, parts); err == nil {
		t.Fatal("a second SendMany before ReceiveMany: no error")
	}
	if err := c.FetchMany(ctx, topic, parts); err == nil {
		t.Fatal("FetchMany while a fetch sent ahead is not received: no error")
	}
	if err := c.ReceiveMany(ctx, topic, parts); err != nil || parts[0].Err != nil {
		t.Fatalf("ReceiveMany: %v, %v", err, parts[0].Err)
	}
	var got []string
	for _, rec := range parts[0].Res.Records {
		got = append(got, string(rec.Value))
	}
	if strings.Join(got, ",") != "b,c" || parts[0].Res.NextOffset != 3 {
		t.Fatalf("records %v, next offset %d; want b,c and 3", got, parts[0].Res.NextOffset)
	}
	parts[0].Offset = 0
	if err := c.FetchMany(ctx, topic, parts); err != nil || len(parts[0].Res.Records) != 3 {
		t.Fatalf("FetchMany after: %v, %d records; want all 3", err, len(parts[0].Res.Records))
	}
}
