package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// beatsAt returns n heartbeats of devices prefix-0.. stamped at (Kafka
// timestamp and ts) at, spread over every partition.
func beatsAt(prefix string, n int, at time.Time) []kafka.Message {
	out := make([]kafka.Message, n)
	for k := range out {
		id := fmt.Sprintf("%s-%02d", prefix, k)
		out[k] = kafka.Message{Key: []byte(id), Time: at,
			Value: []byte(fmt.Sprintf(`{"device_id":%q,"ts":%d}`, id, at.UnixMilli()))}
	}
	return out
}

// failProbes makes the broker answer every probe from now on (the
// prober's read_uncommitted ListOffsets) with an error; the partition count
// is still confirmed, which bounds every watermark. The test fails if no
// probe was answered so: it would prove nothing.
func (r *rig) failProbes(t *testing.T) {
	t.Helper()
	probes := r.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Count: -1,
		When: func(req kmsg.Request) bool { return req.(*kmsg.ListOffsetsRequest).IsolationLevel == 0 }})
	t.Cleanup(func() {
		probes.Remove()
		if !t.Failed() && probes.Hits() == 0 {
			t.Error("no probe was failed: the test proves nothing")
		}
	})
}

// Every fetch answer carries its partition's high-water mark: once every
// record below it is written, the watermark moves to the time the fetch was
// sent, without waiting for a probe. Here every probe fails after the
// warm-up (failProbes) and the records carry timestamps an hour old, so
// only the fetches can have moved the watermark past t0.
func TestFetchHighWaterMarksMoveWatermark(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	old := time.Now().Add(-time.Hour)
	r.produce(t, beatsAt("warm", 40, old)...)
	r.waitCommitted(t, testenv.StableOffsets(t, r.kafka.Brokers(), signals, 4))
	r.failProbes(t)
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now().UnixMilli()
	r.produce(t, beatsAt("a", 40, old)...)
	r.waitCommitted(t, testenv.StableOffsets(t, r.kafka.Brokers(), signals, 4))
	r.produce(t, beatsAt("b", 40, old)...)
	r.waitCommitted(t, testenv.StableOffsets(t, r.kafka.Brokers(), signals, 4))
	// The watermarks are raised in Redis after the batches are written, by
	// a loop of their own, not in step with the commits: wait for them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		wms, _, err := r.store.Watermarks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		late := 0
		for p := 0; p < 4; p++ {
			if wms[p] < t0 {
				late++
				if time.Now().After(deadline) {
					t.Errorf("wm(%d) = %d, %d ms before the records were produced; want it moved by the fetches", p, wms[p], t0-wms[p])
				}
			}
		}
		if late == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A written batch's watermarks reach this process's scanners (Raised) once
// the batch is in Redis, not once they are raised there too: here Redis
// refuses every raise (the watermarks key is not a hash) and every probe
// fails, so only the written batches can have handed over a watermark at
// or past the moment their records were produced.
func TestWrittenBatchesHandWatermarksOverBeforeTheirRaise(t *testing.T) {
	t.Parallel()
	r := newStoppedRig(t)
	r.handed = make(chan map[int]int64, 1000)
	ctx := context.Background()
	rdb := r.redis.Client(t)
	key := r.store.Keys().Watermarks()
	if err := rdb.Set(ctx, key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.failProbes(t)
	r.start(t, ingest.DefaultConfig())

	t0 := time.Now()
	// A handed-over watermark goes no further than the partition count was
	// confirmed (beside each probe, every 10 ms; the count still answers).
	// Written before a confirmation past t0 came back, a partition's only
	// batch would hand over less than t0, and nothing after it could
	// (probes fail): the records go out once one surely has.
	time.Sleep(500 * time.Millisecond)
	r.produce(t, beatsAt("a", 40, t0)...)
	got := make(map[int]int64)
	timeout := time.After(30 * time.Second)
	for p := 0; p < 4; {
		if got[p] >= t0.UnixMilli() {
			p++
			continue
		}
		select {
		case wms := <-r.handed:
			for q, v := range wms {
				got[q] = max(got[q], v)
			}
		case <-timeout:
			t.Fatalf("handed over %v, want every partition at %d or later: a raise Redis refuses held them back", got, t0.UnixMilli())
		}
	}
	if typ := rdb.Type(ctx, key).Val(); typ != "string" {
		t.Fatalf("the watermarks key is a %s: Redis took a raise, the test proves nothing", typ)
	}
}

// A committed offset that the partition no longer holds (deleted by
// retention while no instance ran) does not stall ingest: it skips to the
// partition's first offset and goes on.
func TestCommittedOffsetLostToRetentionSkipsAhead(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.produce(t, beatsAt("a", 40, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))
	r.stop()
	r.produce(t, beatsAt("gone", 40, time.Now())...)
	testenv.DeleteRecords(t, r.kafka.Brokers(), signals, r.endOffsets(t))
	r.produce(t, beatsAt("c", 40, time.Now())...)

	r.start(t, ingest.DefaultConfig())
	r.waitCommitted(t, r.endOffsets(t))
	for k := 0; k < 40; k++ {
		if id := fmt.Sprintf("c-%02d", k); !r.tracked(t, id) {
			t.Errorf("%s, produced after the deleted records, not tracked", id)
		}
		if id := fmt.Sprintf("gone-%02d", k); r.tracked(t, id) {
			t.Errorf("%s was deleted before it was read, yet tracked", id)
		}
	}
}

// A fetch brings more records than a batch may hold: the chunk is split at
// the batch's end and its tail starts the next batch, in order, nothing
// lost or written twice. (With a batch_wait above 0, so the waiting path
// runs too.)
func TestChunksSplitAtBatchSize(t *testing.T) {
	t.Parallel()
	cfg := ingest.DefaultConfig()
	cfg.BatchSize = 7
	cfg.BatchWait = 5 * time.Millisecond
	r := newRigWith(t, cfg)
	msgs := beatsAt("s", 300, time.Now())
	r.produce(t, msgs...)
	r.waitCommitted(t, r.endOffsets(t))
	for _, m := range msgs {
		if !r.tracked(t, string(m.Key)) {
			t.Errorf("%s not tracked", m.Key)
		}
	}
	if n := testutil.ToFloat64(r.metrics.HeartbeatsConsumed); n != 300 {
		t.Errorf("consumed %v heartbeats, want 300", n)
	}
	if n := testutil.ToFloat64(r.metrics.RedisBatches); n < 300/7 {
		t.Errorf("%v Redis batches for 300 heartbeats at batch_size 7, want at least %d", n, 300/7)
	}
}

// Every batch's way from Kafka to Redis is timed (the metrics an operator
// reads to tell the brokers' share of the watermark lag from flatline's
// and Redis's): each fetch that brought records, each batch's wait from the
// answer to its write, and the write. None can be longer than the test.
func TestIngestStagesAreTimed(t *testing.T) {
	t.Parallel()
	began := time.Now()
	r := newRig(t)
	r.produce(t, beatsAt("t", 200, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))
	elapsed := time.Since(began).Seconds()
	batches := testutil.ToFloat64(r.metrics.RedisBatches)
	for _, h := range []struct {
		name string
		h    prometheus.Histogram
		min  float64
	}{
		{"fetch", r.metrics.IngestFetch, 1},
		{"queue", r.metrics.IngestQueue, batches},
		{"write", r.metrics.IngestWrite, batches},
	} {
		var d dto.Metric
		if err := h.h.Write(&d); err != nil {
			t.Fatal(err)
		}
		n, sum := float64(d.GetHistogram().GetSampleCount()), d.GetHistogram().GetSampleSum()
		if n < h.min || n == 0 {
			t.Errorf("%s: %v observations, want at least %v (%v Redis batches)", h.name, n, max(h.min, 1), batches)
		}
		if sum < 0 || sum > n*elapsed {
			t.Errorf("%s: %v observations summing to %.3fs, each at most the test's %.3fs", h.name, n, sum, elapsed)
		}
	}
}

// A quiet partition's fetch comes back empty after the fetch max-wait, and
// kafka-go calls that RequestTimedOut. It is no failure: the partition is
// fetched again on the same connection, with no backoff, so what arrives
// after a quiet spell is read at once. (Counted as failures, the empty
// answers would reopen connections after a backoff of up to 1 s, and hold
// back what arrives meanwhile.)
func TestQuietPartitionsAreNoFetchErrors(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.produce(t, beatsAt("a", 40, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))
	time.Sleep(1500 * time.Millisecond) // about six empty answers per partition
	r.produce(t, beatsAt("b", 40, time.Now())...)
	r.waitCommitted(t, r.endOffsets(t))
	if n := testutil.ToFloat64(r.metrics.FetchErrors); n != 0 {
		t.Errorf("flatline_fetch_errors_total = %v after quiet partitions; want 0", n)
	}
	for k := 0; k < 40; k++ {
		if id := fmt.Sprintf("b-%02d", k); !r.tracked(t, id) {
			t.Errorf("%s, produced after the quiet spell, not tracked", id)
		}
	}
}

// A fetch the broker never answers must not stall a partition: its socket
// deadline (fetch max-wait + grace) ends it, ingest reopens the connection
// and the records behind it are written.
func TestLostFetchDoesNotStallPartition(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Beats for a device of every partition, so all are written first.
	var first []string
	for i := 0; i < 40; i++ {
		first = append(first, fmt.Sprintf("before-%02d", i))
	}
	for _, id := range first {
		r.produce(t, beat(id))
	}
	r.waitCommitted(t, r.endOffsets(t))
	// From now on, swallow one fetch of the signals topic: no answer, ever.
	swallowed := make(chan struct{})
	r.kafka.Cluster().ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f := req.(*kmsg.FetchRequest)
		for _, tp := range f.Topics {
			if tp.Topic == signals && len(tp.Partitions) > 0 {
				close(swallowed)
				return nil, nil, true
			}
		}
		r.kafka.Cluster().KeepControl()
		return nil, nil, false
	})
	select {
	case <-swallowed:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch of the signals topic to swallow")
	}
	var after []string
	for i := 0; i < 40; i++ {
		after = append(after, fmt.Sprintf("after-%02d", i))
	}
	start := time.Now()
	for _, id := range after {
		r.produce(t, beat(id))
	}
	r.waitCommitted(t, r.endOffsets(t))
	for _, id := range after {
		if !r.tracked(t, id) {
			t.Errorf("%s not tracked", id)
		}
	}
	t.Logf("every partition written again %v after the lost fetch", time.Since(start).Round(time.Millisecond))
}
