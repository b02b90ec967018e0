package dispatch

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestLeaderMoveReroutesAtOnce: after the partition leaders move, the first
// produce answered NOT_LEADER makes the producer read the leaders afresh,
// so the events go out on the next attempt. (Through kafka-go's Transport
// alone, every retry went to the old leader until its 6 s metadata refresh.)
func TestLeaderMoveReroutesAtOnce(t *testing.T) {
	t.Parallel()
	const parts = 6
	k := testenv.KafkaWith(t, []kfake.Opt{kfake.NumBrokers(3)}, parts, testTopic)
	m := metrics.New(metrics.Options{})
	p := newTestPublisher(t, k.Brokers(), DefaultConfig(), m)
	ctx := testenv.Context(t, 60*time.Second)
	publish := func(round int) time.Duration {
		deadline := time.Now().Add(-time.Second).UnixMilli() + int64(round)
		detected := time.UnixMilli(deadline + 10)
		cases, overrides := everyCombination(deadline, detected, 3)
		start := time.Now()
		if err := p.Timeouts(ctx, 3, members(cases), overrides, detected); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		return time.Since(start)
	}
	publish(0)
	if got := m.PublishErrorsTotal(); got != 0 {
		t.Fatalf("%v publish errors before the move", got)
	}
	c := k.Cluster()
	for part := int32(0); part < parts; part++ {
		from := c.LeaderFor(testTopic, part)
		if err := c.MoveTopicPartition(testTopic, part, (from+1)%3); err != nil {
			t.Fatalf("move partition %d: %v", part, err)
		}
	}
	took := publish(1)
	// One failed attempt (answered NOT_LEADER by the old leaders) and then
	// the right ones; an attempt sent before kfake's move settled may add
	// one more.
	if got := m.PublishErrorsTotal(); got > 2 {
		t.Errorf("%v failed attempts after the leaders moved, want at most 2: the producer kept asking the old leaders", got)
	}
	t.Logf("events published %v after every partition's leader moved (%v failed attempts)", took.Round(time.Millisecond), m.PublishErrorsTotal())
}
