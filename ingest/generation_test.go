package ingest_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/ingest"
)

// A generation whose first start-offset request fails (here answered
// NOT_LEADER_FOR_PARTITION, as after a leader move) asks again: its
// partitions are read, not left assigned and idle until the next
// rebalance.
func TestGenerationStartRequestIsRetried(t *testing.T) {
	t.Parallel()
	r := newStoppedRig(t)
	r.produce(t, beatsAt("early", 40, time.Now())...)
	end := r.endOffsets(t)
	var refused atomic.Int32
	c := r.kafka.Cluster()
	c.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Load() >= 2 {
			return nil, nil, false // from now on answered as usual
		}
		c.KeepControl()
		lreq := req.(*kmsg.ListOffsetsRequest)
		resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range lreq.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		refused.Add(1)
		return resp, nil, true
	})
	r.start(t, ingest.DefaultConfig())
	r.waitCommitted(t, end)
	if got := r.trackedAll(t, "early", 40); got != "all" {
		t.Errorf("%s of the devices tracked, want all", got)
	}
	if refused.Load() < 2 {
		t.Fatalf("only %d start-offset requests refused: the test did not exercise the retry", refused.Load())
	}
}

// The consumer-lag series are the partitions this instance owns now: when
// its generation ends (here: ingest stops; a rebalance ends it the same
// way) they are removed, not left at their last value.
func TestLagSeriesLeaveWithTheirPartitions(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.waitProbed(t)
	if n := testutil.CollectAndCount(r.metrics.ConsumerLag); n != 4 {
		t.Fatalf("%d lag series while owning 4 partitions", n)
	}
	r.stop()
	if n := testutil.CollectAndCount(r.metrics.ConsumerLag); n != 0 {
		t.Errorf("%d lag series left after the generation ended, want 0", n)
	}
}
