package dispatch

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// TestProduceRequestsStayUnderMaxMessageBytes: 64 concurrent sends of 200
// events to one partition whose max.message.bytes is 16 KiB go out in
// batches the broker takes, every event once. (Sent as one batch per
// partition and round, they were refused MESSAGE_TOO_LARGE, retried for
// ever.)
func TestProduceRequestsStayUnderMaxMessageBytes(t *testing.T) {
	t.Parallel()
	const callers, each = 64, 200
	k := testenv.Kafka(t, 1, testTopic)
	testenv.SetTopicConfig(t, k.Brokers(), testTopic, "max.message.bytes", "16384")
	m := metrics.New(metrics.Options{})
	p := newTestPublisher(t, k.Brokers(), DefaultConfig(), m)
	ctx := testenv.Context(t, 60*time.Second)
	deadline := time.Now().Add(-time.Minute).UnixMilli()
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		ms := make([]shard.Member, each)
		for i := range ms {
			ms[i] = shard.Member{ID: fmt.Sprintf("device-%02d-%03d", c, i), Score: shard.Score(deadline+int64(i), 0)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Timeouts(ctx, 0, ms, nil, time.Now()); err != nil {
				t.Errorf("caller %d: %v", c, err)
			}
		}()
	}
	wg.Wait()
	if got := m.PublishErrorsTotal(); got != 0 {
		t.Errorf("%v failed produce attempts, want 0: a request went over max.message.bytes", got)
	}
	recs := testenv.ReadTopic(t, k.Brokers(), testTopic, 1)
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.Key)]++
	}
	if len(recs) != callers*each || len(seen) != callers*each {
		t.Errorf("topic holds %d events of %d devices, want %d once each", len(recs), len(seen), callers*each)
	}
}

// TestRefusalsNoRetryFixesAreCountedAndSaidOnce: an event larger than the
// topic's max.message.bytes is refused on every attempt. Each attempt is
// counted under reason too_large, and the refusal is logged at ERROR once,
// not once per attempt; the events are kept (retried) until ctx ends.
func TestRefusalsNoRetryFixesAreCountedAndSaidOnce(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, 1, testTopic)
	testenv.SetTopicConfig(t, k.Brokers(), testTopic, "max.message.bytes", "150")
	m := metrics.New(metrics.Options{})
	var logs testenv.SyncBuffer
	p, err := New(DefaultConfig(), testKafkaConfig(k.Brokers()), Options{Policy: testPolicy(), PadWindow: padWindow, Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := testenv.Context(t, 3*time.Second)
	ms := []shard.Member{{ID: "a-device-whose-event-is-larger-than-the-topic-allows", Score: shard.Score(time.Now().UnixMilli(), 0)}}
	if err := p.Timeouts(ctx, 0, ms, nil, time.Now()); err == nil {
		t.Fatal("published an event the topic refuses")
	}
	attempts := testutil.ToFloat64(m.PublishErrors.WithLabelValues("too_large"))
	if attempts < 2 || attempts != m.PublishErrorsTotal() {
		t.Errorf("too_large attempts %v of %v failed ones; want every one of at least 2", attempts, m.PublishErrorsTotal())
	}
	if n := strings.Count(logs.String(), "level=ERROR msg=\"publish refused by Kafka"); n != 1 {
		t.Errorf("refusal logged at ERROR %d times, want once:\n%s", n, logs.String())
	}
}
