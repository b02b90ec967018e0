package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/shard"
)

// kgoClient is a kgo client (independent of kafka-go) producing to the
// signals topic, closed with the test.
func (r *rig) kgoClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.kafka.Brokers()...), kgo.DefaultProduceTopic(signals)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kbeat is a heartbeat of id at at, as a kgo record (Kafka timestamp and
// ts both at).
func kbeat(id string, at time.Time) *kgo.Record {
	return &kgo.Record{Key: []byte(id), Timestamp: at,
		Value: []byte(fmt.Sprintf(`{"device_id":%q,"ts":%d}`, id, at.UnixMilli()))}
}

func kproduce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// inTxn produces rs in one transaction of cl and commits or aborts it.
func inTxn(t *testing.T, cl *kgo.Client, commit bool, rs ...*kgo.Record) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kproduce(t, cl, rs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// deadline is the deadline stored for id (ok false: not tracked).
func (r *rig) deadline(t *testing.T, id string) (int64, bool) {
	t.Helper()
	s, ok, err := r.store.Score(context.Background(), shard.Of(shard.Hash(id), 4), id)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := shard.DecodeScore(s)
	return d, ok
}

// Transactional producers committing and aborting, interleaved with plain
// ones (docs/operations.md, "Transactions"): the records of aborted transactions are
// never heartbeats — a device only they beat for is not tracked, and one
// whose newest heartbeat was aborted keeps its committed deadline — and the
// commit and abort markers are neither dead-lettered nor devices, in both
// formats. Every offset, markers included, is committed.
func TestTransactionsReadCommitted(t *testing.T) {
	eachFormat(t, func(t *testing.T, r *rig, _ ingest.Config) {
		plain := r.kgoClient(t)
		txA := r.kgoClient(t, kgo.TransactionalID("a-"+t.Name()))
		txB := r.kgoClient(t, kgo.TransactionalID("b-"+t.Name()))
		now := time.Now()
		committedAt := now.Add(-10 * time.Minute)
		abortedAt := now.Add(-time.Minute) // later: it would win a ZADD GT
		var committed, aborted, plains []string
		for k := 0; k < 8; k++ {
			c, a, b, p := fmt.Sprintf("c-%02d", k), fmt.Sprintf("x-%02d", k), fmt.Sprintf("both-%02d", k), fmt.Sprintf("p-%02d", k)
			committed, aborted, plains = append(committed, c), append(aborted, a), append(plains, p)
			inTxn(t, txA, true, kbeat(c, committedAt), kbeat(b, committedAt))
			kproduce(t, plain, kbeat(p, now))
			inTxn(t, txB, false, kbeat(a, abortedAt), kbeat(b, abortedAt))
		}
		r.waitCommitted(t, r.endOffsets(t))
		for _, id := range append(committed, plains...) {
			if !r.tracked(t, id) {
				t.Errorf("%s not tracked", id)
			}
		}
		for _, id := range aborted {
			if r.tracked(t, id) {
				t.Errorf("%s, beaten only in aborted transactions, is tracked", id)
			}
		}
		want := committedAt.UnixMilli() + 60_000
		for k := 0; k < 8; k++ {
			id := fmt.Sprintf("both-%02d", k)
			if d, ok := r.deadline(t, id); !ok || d != want {
				t.Errorf("%s: deadline %d (tracked %v), want %d from its committed heartbeat; the aborted one is %d ms later",
					id, d, ok, want, abortedAt.Sub(committedAt).Milliseconds())
			}
		}
		for _, marker := range []string{"\x00\x00\x00\x00", "\x00\x00\x00\x01"} { // ABORT, COMMIT keys
			if r.tracked(t, marker) {
				t.Errorf("a transaction marker (key %q) became a device", marker)
			}
		}
		if n := testutil.ToFloat64(r.metrics.DeadLettered); n != 0 {
			t.Errorf("%v records dead-lettered, want none", n)
		}
		if n := testutil.CollectAndCount(r.metrics.Invalid); n != 0 {
			for _, reason := range decode.AllReasons {
				if v := testutil.ToFloat64(r.metrics.Invalid.WithLabelValues(string(reason))); v != 0 {
					t.Errorf("%v records invalid as %s, want none", v, reason)
				}
			}
		}
		wantBeats := float64(len(committed)*2 + len(plains))
		if n := testutil.ToFloat64(r.metrics.HeartbeatsConsumed); n != wantBeats {
			t.Errorf("consumed %v heartbeats, want %v: the committed and the plain ones", n, wantBeats)
		}
	})
}

// Batches compressed with each codec a producer may choose are read.
func TestCompressedBatchesAreRead(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	var ids []string
	for name, codec := range codecs {
		cl := r.kgoClient(t, kgo.ProducerBatchCompression(codec))
		var rs []*kgo.Record
		for k := 0; k < 50; k++ {
			id := fmt.Sprintf("%s-%02d", name, k)
			ids = append(ids, id)
			// Repetitive values, so that the codec does compress.
			rs = append(rs, kbeat(id, time.Now()))
		}
		kproduce(t, cl, rs...)
	}
	r.waitCommitted(t, r.endOffsets(t))
	for _, id := range ids {
		if !r.tracked(t, id) {
			t.Errorf("%s not tracked", id)
		}
	}
}
