package scanner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
)

// deviceMovingBy returns a device id whose hash has bit n set, so doubling
// n→2n moves it from shard i to i+n.
func deviceMovingBy(n int, tag string) string {
	for k := 0; ; k++ {
		id := fmt.Sprintf("%s-%d", tag, k)
		if shard.Hash(id)&uint64(n) != 0 {
			return id
		}
	}
}

// TestStaleWriterDuringDoubling forces the interleavings of the doubling
// rule (docs/design.md, "Shards and doubling") deterministically: the layout is {count 8, previous 4}, and a device
// that moves from shard i to i+4 has copies in one or both places, as an
// up-to-date instance (new shard) and a stale one (old shard) left them,
// both already due. Exactly one timeout fires, at the later deadline, and
// the device leaves both shards; a stale copy is dropped, never fired.
func TestStaleWriterDuringDoubling(t *testing.T) {
	t.Parallel()
	testStaleWriter(t, 4, 8)
}

// TestStaleWriterDuringHalving is the mirror: {count 4, previous 8} merges
// shard i+4 into i, and the same interleavings hold.
func TestStaleWriterDuringHalving(t *testing.T) {
	t.Parallel()
	testStaleWriter(t, 8, 4)
}

func testStaleWriter(t *testing.T, from, to int) {
	store, _ := newStore(t)
	kf := testenv.Kafka(t, 1, "device-timeouts")
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	if _, err := store.SetLayout(ctx, 0, shard.Layout{Count: from}); err != nil {
		t.Fatal(err)
	}
	if _, err := rebalance.Scale(ctx, store, to, time.Now()); err != nil {
		t.Fatal(err)
	}
	w := rebalance.NewWatcher(rebalance.WatcherOptions{Store: store, Config: rebalance.DefaultConfig(), Log: log})
	if _, err := w.Init(ctx, from); err != nil {
		t.Fatal(err)
	}
	if l := w.Current(); l.Count != to || l.Previous != from {
		t.Fatalf("layout %+v", l)
	}

	now := time.Now()
	early, late := now.Add(-2*time.Second).UnixMilli(), now.Add(-time.Second).UnixMilli()
	type copies struct{ old, new int64 } // deadlines; 0 = no copy
	cases := map[string]copies{
		"stale old after new": {old: late, new: early}, // the stale instance wrote last, later
		"new after old":       {old: early, new: late},
		"same deadline":       {old: late, new: late},
		"only old":            {old: late},
		"only new":            {new: late},
	}
	want := make(map[string]int64)
	var b shard.Batch
	b.Reset(8)
	for name, c := range cases {
		id := deviceMovingBy(4, name)
		h := shard.Hash(id)
		oldShard, newShard := shard.Of(h, from), shard.Of(h, to)
		if oldShard == newShard {
			t.Fatalf("%s does not move", id)
		}
		if c.old != 0 {
			b.Add(oldShard, id, shard.Score(c.old, 0), 0)
		}
		if c.new != 0 {
			b.Add(newShard, id, shard.Score(c.new, 0), 0)
		}
		want[id] = max(c.old, c.new)
	}
	if _, err := store.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	fired, _ := runScanner(t, store, w, kf.Brokers(), []int{0, 1, 2, 3, 4, 5, 6, 7})

	// Wait until every device has fired and its copies are gone.
	timeout := time.After(20 * time.Second)
	seen := map[string]bool{}
	for len(seen) < len(want) {
		select {
		case id := <-fired:
			seen[id] = true
		case <-timeout:
			t.Fatalf("fired %v of %d devices", seen, len(want))
		}
	}
	sizes, err := store.Sizes(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		if n != 0 {
			t.Errorf("shard %d still holds %d members after every device fired", i, n)
		}
	}
	// Exactly one event per device, at the later deadline.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kf.Brokers(), Topic: "device-timeouts", Partition: 0, MaxBytes: 1 << 20, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	lag, err := r.ReadLag(rctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for ; lag > 0; lag-- {
		msg, err := r.ReadMessage(rctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev dispatch.Event
		if err := json.Unmarshal(msg.Value, &ev); err != nil {
			t.Fatal(err)
		}
		got[ev.DeviceID] = append(got[ev.DeviceID], ev.DeadlineMs)
	}
	for id, deadline := range want {
		if len(got[id]) != 1 || got[id][0] != deadline {
			t.Errorf("%s: timeouts at %v, want exactly one at %d", id, got[id], deadline)
		}
	}
}
