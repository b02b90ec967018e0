package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// A reader held back in the middle of a fetch answer (the batcher is slow)
// finishes the answer past the deadline the fetch was sent with, and
// kafka-go ends it with RequestTimedOut although every record was read.
// That is no failure: the reader fetches on, on the same connection, and
// every record arrives once, in order.
func TestReadGoesOnAfterAnswerReadPastItsDeadline(t *testing.T) {
	t.Parallel()
	const topic, n = "signals", 3000
	k := testenv.Kafka(t, 1, topic)
	produce(t, k.Brokers(), topic, 0, n) // before the reader starts: its first answer holds them all
	r := startReader(t, k.Brokers(), topic)
	r.take(t, 1) // the first chunk of the first answer
	if r.next >= n {
		t.Fatalf("the first hand-off held all %d records; the test needs an answer of several chunks", n)
	}
	time.Sleep(fetchMaxWait + fetchGrace + 250*time.Millisecond)
	r.take(t, n)
	produce(t, k.Brokers(), topic, n, n+10)
	r.take(t, n+10)
	if e := testutil.ToFloat64(r.m.FetchErrors); e != 0 {
		t.Errorf("flatline_fetch_errors_total = %v; want 0", e)
	}
}

// A broker slower to begin its answers than a fetch's socket deadline
// allows does not stall the partition: the fetch its deadline ends fails
// once, and the reader grants the next one more time, in which the answer
// comes. Every fetch here is answered fetchMaxWait+fetchGrace+500ms after
// it arrived; with a fixed grace every one of them would fail alike.
func TestReadOutwaitsABrokerSlowToAnswer(t *testing.T) {
	t.Parallel()
	const topic, n = "signals", 100
	k := testenv.Kafka(t, 1, topic)
	produce(t, k.Brokers(), topic, 0, n)
	c := k.Cluster()
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(fetchMaxWait + fetchGrace + 500*time.Millisecond) })
		return nil, nil, false // then answered as usual
	})

	r := startReader(t, k.Brokers(), topic)
	r.take(t, n) // stuck instead if every fetch ended at its deadline
	if e := testutil.ToFloat64(r.m.FetchErrors); e < 1 {
		t.Errorf("flatline_fetch_errors_total = %v; want the first fetch, answered past its deadline, counted", e)
	}
}

// A broker reader sends its next fetch as soon as an answer came back
// whole, before it hands that answer's records on, so that the broker
// builds the next answer while the batcher takes this one: held back in
// the middle of an answer, the reader has already asked for the records
// after it, from the answer's end. Every record still arrives once, in
// order.
func TestReaderAsksForTheNextAnswerBeforeHandingThisOneOn(t *testing.T) {
	t.Parallel()
	const topic, n = "signals", 3000
	k := testenv.Kafka(t, 1, topic)
	produce(t, k.Brokers(), topic, 0, n) // before the reader starts: its first answer holds them all
	c := k.Cluster()
	var mu sync.Mutex
	var offsets []int64 // of partition 0, one per Fetch the broker took
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range kreq.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				mu.Lock()
				offsets = append(offsets, rp.FetchOffset)
				mu.Unlock()
			}
		}
		return nil, nil, false // answered as usual
	})
	r := startReader(t, k.Brokers(), topic)
	r.take(t, 1) // the first chunk of the first answer; the reader waits to hand on the next
	if r.next >= n {
		t.Fatalf("the first hand-off held all %d records; the test needs an answer of several chunks", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(offsets)
		mu.Unlock()
		if len(got) >= 2 {
			if got[0] != 0 || got[1] != n {
				t.Fatalf("fetches at offsets %v; want 0, then %d (the first answer's end) before its records are handed on", got, n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetches at offsets %v while the reader hands on the first answer; want the next one sent already", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.take(t, n)
	produce(t, k.Brokers(), topic, n, n+10)
	r.take(t, n+10)
	if e := testutil.ToFloat64(r.m.FetchErrors); e != 0 {
		t.Errorf("flatline_fetch_errors_total = %v; want 0", e)
	}
}

// produce appends records from..to-1 (their values the numbers) to
// partition 0 of topic, all in one produce request.
func produce(t *testing.T, brokers []string, topic string, from, to int) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, BatchSize: to - from, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	msgs := make([]kafka.Message, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i))})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// testReader reads partition 0 from offset 0 (a router and its broker
// reader) and hands its chunks to the test, over an unbuffered channel:
// the reader waits for each hand-off, as behind a slow batcher.
type testReader struct {
	m    *metrics.Metrics
	out  chan chunk
	next int64 // the offset the test takes next
}

func startReader(t *testing.T, brokers []string, topic string) *testReader {
	t.Helper()
	kc := kafkaconn.DefaultConfig()
	kc.Brokers, kc.SignalsTopic = brokers, topic
	dialer, err := kc.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	r := &testReader{m: metrics.New(metrics.Options{}), out: make(chan chunk)}
	in := &Ingest{opts: Options{Kafka: kc, Metrics: r.m, Log: slog.New(slog.DiscardHandler), Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	parts := []*partitionFetch{in.newPartitionFetch(0, 0, &position{})}
	go func() { defer close(done); in.newRouter(dialer, parts, r.out, nil).run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// take receives chunks until every record before offset until has come,
// each once and in order.
func (r *testReader) take(t *testing.T, until int64) {
	t.Helper()
	for r.next < until {
		select {
		case c := <-r.out:
			for _, msg := range c.msgs {
				if msg.Offset != r.next {
					t.Fatalf("record at offset %d, want %d", msg.Offset, r.next)
				}
				r.next++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stuck at offset %d of %d", r.next, until)
		}
	}
}

// A broker reader's request order turns by one each fetch, so that when
// answers reach their byte limit, which the broker fills in the request's
// order, every partition comes first within as many fetches as there are
// partitions, and the request always carries each partition once.
func TestBrokerFetchOrderGivesEveryPartitionItsTurnFirst(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 3, 5, 8} {
		r := &brokerReader{}
		for p := range n {
			r.parts = append(r.parts, &partitionFetch{partition: p})
		}
		first := map[int]bool{}
		for range n {
			r.request()
			first[r.req[0].Partition] = true
			seen := map[int]bool{}
			for _, part := range r.req {
				seen[part.Partition] = true
			}
			if len(r.req) != n || len(seen) != n {
				t.Fatalf("%d partitions: a request of %v", n, r.req)
			}
		}
		if len(first) != n {
			t.Errorf("%d partitions: first in %d fetches: %v; want each once", n, n, first)
		}
	}
}
