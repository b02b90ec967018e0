package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/ingest"
)

// A producer whose clock runs 60 s ahead (docs/operations.md, "Time") is believed only
// up to the moment ingest fetched its records: no partition's watermark
// passes the fetch, and no device's deadline passes the fetch + max_skew +
// its timeout — in either format.
func TestProducerClockAheadIsCappedAtFetchTime(t *testing.T) {
	eachFormat(t, func(t *testing.T, r *rig, cfg ingest.Config) {
		cl := r.kgoClient(t)
		var ids []string
		for k := 0; k < 40; k++ {
			id := fmt.Sprintf("ahead-%02d", k)
			ids = append(ids, id)
			kproduce(t, cl, kbeat(id, time.Now().Add(time.Minute)))
		}
		r.waitCommitted(t, r.endOffsets(t))
		fetched := time.Now() // every fetch of them was before this
		wms, _, err := r.store.Watermarks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for p, wm := range wms {
			if wm > fetched.UnixMilli() {
				t.Errorf("wm(%d) = %d, %d ms past the fetch", p, wm, wm-fetched.UnixMilli())
			}
		}
		limit := fetched.Add(cfg.MaxSkew + time.Minute).UnixMilli() // timeouts.default
		for _, id := range ids {
			d, ok := r.deadline(t, id)
			if !ok {
				t.Errorf("%s not tracked", id)
			} else if d > limit {
				t.Errorf("%s: deadline %d ms past fetch time + max_skew + timeout", id, d-limit)
			}
		}
	})
}
