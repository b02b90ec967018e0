package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/shard"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// beatWith is a heartbeat of id with a value's extra JSON fields.
func beatWith(id, extra string) kafka.Message {
	return kafka.Message{Key: []byte(id), Value: []byte(fmt.Sprintf(`{"device_id":%q,"ts":%d%s}`, id, time.Now().UnixMilli(), extra))}
}

// A heartbeat naming a parent stores it in the child's shard; the latest
// parent stands, a heartbeat without the field leaves it, "" removes it,
// a device naming itself has none; and a parent is written only when it
// changes: a child repeating its parent, or a device without one, writes
// nothing more than its deadline.
func TestParentsAreWrittenOnlyWhenTheyChange(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	parentOf := func(id string) string {
		t.Helper()
		p, err := r.store.ParentOf(ctx, shard.Of(shard.Hash(id), 4), id)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	step := func(want map[string]string, msgs ...kafka.Message) {
		t.Helper()
		r.produce(t, msgs...)
		r.waitCommitted(t, r.endOffsets(t))
		for id, p := range want {
			if got := parentOf(id); got != p {
				t.Fatalf("parent of %s = %q, want %q", id, got, p)
			}
		}
	}
	step(map[string]string{"c1": "gw-1", "c2": "gw-1", "plain": "", "self": ""},
		beatWith("c1", `,"parent":"gw-1"`), beatWith("c2", `,"parent":"gw-1"`), beat("plain"),
		beatWith("self", `,"parent":"self"`))
	// Taken away behind ingest's back, c1's parent stays away while c1
	// repeats it: ingest does not write it again.
	if err := r.store.Client().HDel(ctx, r.store.Keys().Parents(shard.Of(shard.Hash("c1"), 4)), shard.ParentField("c1")).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		step(map[string]string{"c1": "", "c2": "gw-1"},
			beatWith("c1", `,"parent":"gw-1"`), beatWith("c2", `,"parent":"gw-1"`), beat("plain"))
	}
	step(map[string]string{"c1": "gw-3"}, beatWith("c1", `,"parent":"gw-3"`))
	step(map[string]string{"c1": "gw-1"}, beatWith("c1", `,"parent":"gw-1"`))
	step(map[string]string{"c1": "gw-2", "c2": "gw-1"}, beatWith("c1", `,"parent":"gw-2"`), beat("c2"))
	step(map[string]string{"c1": "", "c2": "gw-1"}, beatWith("c1", `,"parent":""`))
	step(map[string]string{"c2": ""}, beatWith("c2", `,"parent":"c2"`))
	if got := testutil.ToFloat64(r.metrics.Fallbacks.WithLabelValues("self_parent")); got != 2 {
		t.Errorf("self_parent fallbacks %v, want 2", got)
	}
	// A tombstone deletes the parent; the next heartbeat naming it writes
	// it again, although this generation wrote it before.
	step(map[string]string{"c2": ""}, beatWith("c2", `,"parent":"gw-3"`), kafka.Message{Key: []byte("c2")})
	step(map[string]string{"c2": "gw-3"}, beatWith("c2", `,"parent":"gw-3"`))
}
