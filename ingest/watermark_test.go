package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/ingest"
)

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
	probes := r.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Count: -1,
		When: func(req kmsg.Request) bool { return req.(*kmsg.ListOffsetsRequest).IsolationLevel == 0 }})
	defer probes.Remove()
	r.start(t, ingest.DefaultConfig())

	t0 := time.Now()
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
	if probes.Hits() == 0 {
		t.Fatal("no probe was failed: the test proves nothing")
	}
}
