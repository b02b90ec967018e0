package ingest_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// fetchLog is what the brokers saw of ingest's fetches: for each Fetch
// request of the signals topic, the broker that took it and the partitions
// it carried.
type fetchLog struct {
	mu   sync.Mutex
	reqs []fetchReq
	// more is signalled after each request logged.
	more chan struct{}
}

type fetchReq struct {
	node  int32
	parts []int32
}

// watchFetches records every Fetch request the cluster takes, leaving the
// answer to the cluster.
func watchFetches(c *kfake.Cluster) *fetchLog {
	l := &fetchLog{more: make(chan struct{}, 1)}
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := fetchReq{node: c.CurrentNode()}
		for _, rt := range kreq.(*kmsg.FetchRequest).Topics {
			if rt.Topic == signals {
				for _, rp := range rt.Partitions {
					req.parts = append(req.parts, rp.Partition)
				}
			}
		}
		slices.Sort(req.parts)
		l.mu.Lock()
		l.reqs = append(l.reqs, req)
		l.mu.Unlock()
		select {
		case l.more <- struct{}{}:
		default:
		}
		return nil, nil, false // answered as usual
	})
	return l
}

// since returns the requests from the n-th on.
func (l *fetchLog) since(n int) []fetchReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[n:])
}

func (l *fetchLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// steady waits until each broker in want has taken three more fetches
// than it had, and checks that each of those carried exactly the
// partitions the broker leads (want) and that no other broker was sent a
// fetch of the signals topic meanwhile.
func (l *fetchLog) steady(t *testing.T, want map[int32][]int32) {
	t.Helper()
	from := l.len()
	timeout := time.After(10 * time.Second)
	for {
		got := map[int32]int{}
		for _, req := range l.since(from) {
			got[req.node]++
		}
		enough := true
		for node := range want {
			enough = enough && got[node] >= 3
		}
		if enough {
			break
		}
		select {
		case <-l.more:
		case <-timeout:
			t.Fatalf("fetches per broker %v in 10 s; want three or more each of %v", got, want)
		}
	}
	for _, req := range l.since(from) {
		if !slices.Equal(req.parts, want[req.node]) {
			t.Errorf("broker %d took a fetch of partitions %v; want one of %v (each broker's partitions in one request)", req.node, req.parts, want[req.node])
		}
	}
}

// newBrokersRig is a rig on three brokers: partitions 0 and 1 led by
// broker 0, 2 by broker 1, 3 by broker 2; the fetches they take are
// logged.
func newBrokersRig(t *testing.T) (*rig, *fetchLog) {
	t.Helper()
	k := testenv.KafkaWith(t, []kfake.Opt{kfake.NumBrokers(3)}, 4, signals, dlq, "device-timeouts")
	for p, node := range []int32{0, 0, 1, 2} {
		if err := k.Cluster().MoveTopicPartition(signals, int32(p), node); err != nil {
			t.Fatal(err)
		}
	}
	log := watchFetches(k.Cluster())
	r := newStoppedRigOn(t, k)
	r.start(t, ingest.DefaultConfig())
	return r, log
}

// produceTracked writes a heartbeat for each of n devices, spread over
// every partition, and waits until every partition's records are
// committed and every device is tracked.
func (r *rig) produceTracked(t *testing.T, prefix string, n int) {
	t.Helper()
	r.produce(t, beatsAt(prefix, n, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))
	for k := range n {
		if id := fmt.Sprintf("%s-%02d", prefix, k); !r.tracked(t, id) {
			t.Errorf("device %s not tracked", id)
		}
	}
}

// Ingest sends one fetch per broker at a time, carrying every partition
// that broker leads for it — not a fetch per partition — and reads and
// tracks the records of every partition. The brokers' own record of the
// requests they took is the check.
func TestFetchesGoOnePerBrokerWithAllItsPartitions(t *testing.T) {
	t.Parallel()
	r, log := newBrokersRig(t)
	r.produceTracked(t, "a", 40)
	for _, req := range log.since(0) {
		for _, p := range req.parts {
			if leader := []int32{0, 0, 1, 2}[p]; leader != req.node {
				t.Errorf("broker %d was sent a fetch of partition %d, which broker %d leads", req.node, p, leader)
			}
		}
	}
	log.steady(t, map[int32][]int32{0: {0, 1}, 1: {2}, 2: {3}})
	if e := testutil.ToFloat64(r.metrics.FetchErrors); e != 0 {
		t.Errorf("flatline_fetch_errors_total = %v; want 0", e)
	}
}

// A partition whose leader moves to another broker follows it: its old
// broker answers NotLeaderForPartition, the partition is routed to the
// reader of its new leader and fetched there with that broker's others,
// and every record before and after the move is read and tracked.
func TestPartitionFollowsItsMovedLeader(t *testing.T) {
	t.Parallel()
	r, log := newBrokersRig(t)
	r.produceTracked(t, "a", 40)
	if err := r.kafka.Cluster().MoveTopicPartition(signals, 3, 0); err != nil {
		t.Fatal(err)
	}
	r.produceTracked(t, "b", 40)
	log.steady(t, map[int32][]int32{0: {0, 1, 3}, 1: {2}})
	if e := testutil.ToFloat64(r.metrics.FetchErrors); e < 1 {
		t.Errorf("flatline_fetch_errors_total = %v; want the old leader's NotLeaderForPartition counted", e)
	}
}

// A partition whose share of its broker's fetches fails (a storage error
// on that broker, for that partition alone) does not hold back the
// partitions fetched beside it: they are read and committed to their ends
// while it fails, and it catches up once its fetches answer again.
func TestAFailingPartitionDoesNotHoldItsBrokersOthers(t *testing.T) {
	t.Parallel()
	r, _ := newBrokersRig(t)
	failing := r.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: signals,
		Partitions: []int32{1}, Err: kerr.KafkaStorageError, Count: -1})
	r.produce(t, beatsAt("a", 40, time.Now())...)
	ends := r.endOffsets(t)
	if ends[1] == 0 {
		t.Fatal("no record in partition 1: the test proves nothing")
	}
	others := map[int]int64{0: ends[0], 2: ends[2], 3: ends[3]}
	r.waitCommitted(t, others) // partition 0 shares partition 1's broker and fetches
	if got := r.committedOffsets(t)[1]; got >= ends[1] {
		t.Errorf("partition 1 committed to %d while its fetches failed", got)
	}
	if failing.Hits() == 0 {
		t.Error("no fetch of partition 1 failed: the test proves nothing")
	}
	if e := testutil.ToFloat64(r.metrics.FetchErrors); e < 1 {
		t.Errorf("flatline_fetch_errors_total = %v; want partition 1's failures counted", e)
	}
	failing.Remove()
	r.produceTracked(t, "b", 40)
	for k := range 40 {
		if id := fmt.Sprintf("a-%02d", k); !r.tracked(t, id) {
			t.Errorf("device %s not tracked", id)
		}
	}
}
