package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	produce := func(from, to int) {
		t.Helper()
		w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()...), Topic: topic, BatchSize: n, RequiredAcks: kafka.RequireAll}
		defer w.Close()
		msgs := make([]kafka.Message, 0, to-from)
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i))})
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, n) // before the reader starts: its first answer holds them all

	kc := kafkaconn.DefaultConfig()
	kc.Brokers, kc.SignalsTopic = k.Brokers(), topic
	dialer, err := kc.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	in := &Ingest{opts: Options{Kafka: kc, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan chunk) // unbuffered: the reader waits for each hand-off
	done := make(chan struct{})
	go func() { defer close(done); in.newPartitionReader(dialer, 0, 0, out, &position{}).run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	next := int64(0)
	take := func(until int64) {
		t.Helper()
		for next < until {
			select {
			case c := <-out:
				for _, msg := range c.msgs {
					if msg.Offset != next {
						t.Fatalf("record at offset %d, want %d", msg.Offset, next)
					}
					next++
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("stuck at offset %d of %d", next, until)
			}
		}
	}
	take(1) // the first chunk of the first answer
	if next >= n {
		t.Fatalf("the first hand-off held all %d records; the test needs an answer of several chunks", n)
	}
	time.Sleep(fetchMaxWait + fetchGrace + 250*time.Millisecond)
	take(n)
	produce(n, n+10)
	take(n + 10)
	if e := testutil.ToFloat64(m.FetchErrors); e != 0 {
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
	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()...), Topic: topic, BatchSize: n, RequiredAcks: kafka.RequireAll}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte(fmt.Sprint(i))}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	c := k.Cluster()
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(fetchMaxWait + fetchGrace + 500*time.Millisecond) })
		return nil, nil, false // then answered as usual
	})

	kc := kafkaconn.DefaultConfig()
	kc.Brokers, kc.SignalsTopic = k.Brokers(), topic
	dialer, err := kc.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	in := &Ingest{opts: Options{Kafka: kc, Metrics: m, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan chunk)
	done := make(chan struct{})
	go func() { defer close(done); in.newPartitionReader(dialer, 0, 0, out, &position{}).run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for next := int64(0); next < n; {
		select {
		case c := <-out:
			for _, msg := range c.msgs {
				if msg.Offset != next {
					t.Fatalf("record at offset %d, want %d", msg.Offset, next)
				}
				next++
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stuck at offset %d of %d: every fetch ends at its deadline", next, n)
		}
	}
	if e := testutil.ToFloat64(m.FetchErrors); e < 1 {
		t.Errorf("flatline_fetch_errors_total = %v; want the first fetch, answered past its deadline, counted", e)
	}
}
