package kfetch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txn begins a transaction on a transactional kgo client and returns the
// function that ends it.
func txn(t *testing.T, cl *kgo.Client) func(commit bool) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	return func(commit bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
}

const (
	commit = true
	abort  = false
)

// Transactional producers interleaved with a plain one: the fetcher returns
// exactly the committed and the non-transactional records — never a
// commit/abort marker, never a record of an aborted transaction — and its
// NextOffset stops at the last stable offset while a transaction is open
// and reaches the high-water mark once none is. Whether the whole log comes
// in one fetch or one batch per fetch (so that fetches start inside aborted
// transactions, after their first batch), the answer is the same.
func TestReadCommittedReturnsExactlyTheCommittedRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"whole log per fetch", func(*Config) {}},
		{"one batch per fetch", func(c *Config) { c.PartitionMaxBytes = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const topic = "signals"
			r := newRig(t, topic)
			cfg := DefaultConfig()
			tc.cfg(&cfg)
			paths := r.paths(t, cfg)
			plain := r.producer(t, topic)
			txA := r.producer(t, topic, kgo.TransactionalID("a-"+t.Name()))
			txB := r.producer(t, topic, kgo.TransactionalID("b-"+t.Name()))
			put := func(cl *kgo.Client, vs ...string) {
				for _, v := range vs { // a batch each
					produce(t, cl, values(v)...)
				}
			}

			put(plain, "p0")
			end := txn(t, txA)
			put(txA, "c1-a")
			put(plain, "p1")
			put(txA, "c1-b")
			end(commit)

			end = txn(t, txA)
			put(txA, "x2-a")
			put(plain, "p2")
			put(txA, "x2-b", "x2-c")
			end(abort)
			put(plain, "p3")

			// Two producers' transactions overlap: A's aborts, B's commits.
			endA, endB := txn(t, txA), txn(t, txB)
			put(txA, "x3-a")
			put(txB, "c4-a")
			put(plain, "p4")
			put(txA, "x3-b")
			put(txB, "c4-b")
			endA(abort)
			endB(commit)

			end = txn(t, txA)
			put(txA, "c5")
			end(commit)
			end = txn(t, txB)
			put(txB, "x6")
			end(abort) // the log ends with an abort marker

			want := []string{"p0", "c1-a", "p1", "c1-b", "p2", "p3", "c4-a", "p4", "c4-b", "c5"}
			hwm, lso := r.endOffsets(t, topic)
			next := map[string]int64{}
			for name, f := range paths {
				recs, last := readToStable(t, f, topic, 0)
				checkValues(t, name, recs, want)
				if lso != hwm || last.NextOffset != hwm || last.HighWatermark != hwm || last.LastStableOffset != lso {
					t.Errorf("%s: NextOffset %d, result HWM %d LSO %d; want all at the high-water mark %d (LSO %d)",
						name, last.NextOffset, last.HighWatermark, last.LastStableOffset, hwm, lso)
				}
				next[name] = last.NextOffset
			}

			// An open transaction holds the last stable offset at its
			// first record: nothing at or past it comes back, the plain
			// record written after it included, until it commits.
			end = txn(t, txA)
			put(txA, "c7")
			put(plain, "p7")
			hwm, lso = r.endOffsets(t, topic)
			for name, f := range paths {
				more, last := readToStable(t, f, topic, next[name])
				if len(more) != 0 || last.NextOffset != lso || lso >= hwm {
					t.Errorf("%s with a transaction open: read %v, NextOffset %d, LSO %d, HWM %d; want nothing, NextOffset at the LSO below the HWM",
						name, more, last.NextOffset, lso, hwm)
				}
				next[name] = last.NextOffset
			}
			end(commit)
			hwm, _ = r.endOffsets(t, topic)
			for name, f := range paths {
				more, last := readToStable(t, f, topic, next[name])
				checkValues(t, name, more, []string{"c7", "p7"})
				if last.NextOffset != hwm {
					t.Errorf("%s after the commit: NextOffset %d, want the high-water mark %d", name, last.NextOffset, hwm)
				}
			}
		})
	}
}

func checkValues(t *testing.T, path string, recs []got, want []string) {
	t.Helper()
	var vs []string
	for i, r := range recs {
		vs = append(vs, r.Value)
		if r.Key != "k-"+r.Value {
			t.Errorf("%s: record %v has key %q", path, r, r.Key)
		}
		if i > 0 && r.Offset <= recs[i-1].Offset {
			t.Errorf("%s: offsets out of order: %v after %v", path, r, recs[i-1])
		}
	}
	if !slices.Equal(vs, want) {
		t.Errorf("%s read %s\nwant %s", path, strings.Join(vs, " "), strings.Join(want, " "))
	}
}
