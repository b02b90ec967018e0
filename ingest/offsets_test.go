package ingest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// waitProbed waits until ingest has probed every partition, so its start
// offsets are resolved: whatever is produced from then on is read under
// either kafka.start_offset.
func (r *rig) waitProbed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.CollectAndCount(r.metrics.ConsumerLag) < 4 {
		if time.Now().After(deadline) {
			t.Fatal("ingest never probed its partitions")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// trackedAll reports, for each of n devices prefix-00.., whether it is
// tracked, as "all", "none" or "some".
func (r *rig) trackedAll(t *testing.T, prefix string, n int) string {
	t.Helper()
	got := 0
	for k := 0; k < n; k++ {
		if r.tracked(t, fmt.Sprintf("%s-%02d", prefix, k)) {
			got++
		}
	}
	switch got {
	case n:
		return "all"
	case 0:
		return "none"
	}
	return "some"
}

// commitOffsets commits offset for every signals partition in group, as an
// admin tool would (no member, generation -1).
func commitOffsets(t *testing.T, brokers []string, group string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = signals
	for p := int32(0); p < 4; p++ {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	// OffsetCommit v10 names topics by ID; a version that takes names.
	resp := testenv.KafkaRequest(t, "commit offsets", brokers, req, kgo.MaxVersions(kversion.V3_6_0())).(*kmsg.OffsetCommitResponse)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("commit offset %d of partition %d: error %d", offset, p.Partition, p.ErrorCode)
			}
		}
	}
}

// kafka.start_offset decides where a new consumer group starts: earliest
// reads what the topic already holds, latest only what is appended after.
func TestStartOffsetOfNewGroup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ policy, before string }{
		{kafkaconn.StartEarliest, "all"},
		{kafkaconn.StartLatest, "none"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			r := newStoppedRig(t)
			r.produce(t, beatsAt("before", 40, time.Now())...)
			r.kcfg.StartOffset = tc.policy
			r.start(t, ingest.DefaultConfig())
			r.waitProbed(t)
			r.produce(t, beatsAt("after", 40, time.Now())...)
			r.waitCommitted(t, r.endOffsets(t))
			if got := r.trackedAll(t, "before", 40); got != tc.before {
				t.Errorf("start_offset %s: %s of the devices produced before the start tracked, want %s", tc.policy, got, tc.before)
			}
			if got := r.trackedAll(t, "after", 40); got != "all" {
				t.Errorf("start_offset %s: %s of the devices produced after the start tracked, want all", tc.policy, got)
			}
		})
	}
}

// A committed offset out of range — below the log start (retention) or
// past the log end (the topic recreated, the log truncated) — moves by
// kafka.start_offset and never stalls the partition: what is appended
// afterwards is tracked.
func TestCommittedOffsetOutOfRangeResetsByStartOffset(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, policy string
		pastEnd      bool
		held         string // the devices in the topic when ingest starts
	}{
		{"below log start, earliest", kafkaconn.StartEarliest, false, "all"},
		{"below log start, latest", kafkaconn.StartLatest, false, "none"},
		{"past log end, earliest", kafkaconn.StartEarliest, true, "all"},
		{"past log end, latest", kafkaconn.StartLatest, true, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newStoppedRig(t)
			if tc.pastEnd {
				r.produce(t, beatsAt("held", 40, time.Now())...)
				commitOffsets(t, r.kafka.Brokers(), r.kcfg.GroupID, 1_000_000)
			} else {
				r.produce(t, beatsAt("gone", 40, time.Now())...)
				commitOffsets(t, r.kafka.Brokers(), r.kcfg.GroupID, 1)
				testenv.DeleteRecords(t, r.kafka.Brokers(), signals, r.endOffsets(t))
				r.produce(t, beatsAt("held", 40, time.Now())...)
			}
			r.kcfg.StartOffset = tc.policy
			r.start(t, ingest.DefaultConfig())
			// The reset commits where it moved to: the end, either way.
			r.waitCommitted(t, r.endOffsets(t))
			r.produce(t, beatsAt("after", 40, time.Now())...)
			r.waitCommitted(t, r.endOffsets(t))
			if got := r.trackedAll(t, "held", 40); got != tc.held {
				t.Errorf("%s of the devices in the topic at the start tracked, want %s", got, tc.held)
			}
			if got := r.trackedAll(t, "after", 40); got != "all" {
				t.Errorf("%s of the devices produced after the reset tracked, want all", got)
			}
			if got := r.trackedAll(t, "gone", 40); got != "none" {
				t.Errorf("%s of the deleted devices tracked, want none", got)
			}
		})
	}
}

// A partition that cannot be read never has its watermark raised: with a
// committed offset past the log end and every fetch lost, the prober —
// which finds the written offset at or past the high-water mark — leaves
// wm(p) alone, round after round. Once fetches are answered, the offset
// resets and the partition is read.
func TestNoWatermarkRaiseWhileOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	r := newStoppedRig(t)
	r.produce(t, beatsAt("held", 40, time.Now())...)
	commitOffsets(t, r.kafka.Brokers(), r.kcfg.GroupID, 1_000_000)
	var blocked atomic.Bool
	blocked.Store(true)
	c := r.kafka.Cluster()
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			if tp.Topic == signals && blocked.Load() {
				return nil, nil, true // never answered
			}
		}
		return nil, nil, false
	})
	t0 := time.Now().UnixMilli()
	r.start(t, ingest.DefaultConfig())
	r.waitProbed(t)
	for from := r.raised.Load(); r.raised.Load() < from+50; {
		time.Sleep(5 * time.Millisecond) // fifty probe rounds
	}
	wms, _, err := r.store.Watermarks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for p, wm := range wms {
		if wm >= t0 {
			t.Errorf("wm(%d) raised to %d, %d ms after ingest started, while the partition could not be read", p, wm, wm-t0)
		}
	}
	blocked.Store(false)
	r.waitCommitted(t, r.endOffsets(t))
	if got := r.trackedAll(t, "held", 40); got != "all" {
		t.Errorf("%s of the devices tracked after the reset, want all", got)
	}
}

// Under kafka.start_offset latest, a partition added to the signals topic
// while the group runs has no committed offset either — but it is not a
// backlog to skip: the devices whose keys moved there beat into it from
// the moment it exists, before the group rebalances. Such a partition is
// read from its start.
func TestPartitionAddedUnderLatestIsReadFromItsStart(t *testing.T) {
	t.Parallel()
	r := newStoppedRig(t)
	r.kcfg.StartOffset = kafkaconn.StartLatest
	r.start(t, ingest.DefaultConfig())
	r.waitProbed(t)
	r.produce(t, beatsAt("before", 40, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))

	testenv.AddPartitions(t, r.kafka.Brokers(), signals, 8)
	cl := r.kgoClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var ids []string
	for p := int32(4); p < 8; p++ {
		id := fmt.Sprintf("moved-%d", p)
		rec := kbeat(id, time.Now())
		rec.Partition = p
		kproduce(t, cl, rec)
		ids = append(ids, id)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for !r.tracked(t, id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s, produced to a new partition before the group rebalanced, never tracked", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

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
