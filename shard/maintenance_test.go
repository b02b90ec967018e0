package shard_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// A window is kept with its match and times, ends early once, and the
// open-window limit counts only windows open now.
func TestWindowsStartEndAndTheOpenLimit(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	w := shard.Window{ID: "w1", Match: shard.WindowMatch{Prefix: "rack-7/"}, FromMs: 1000, UntilMs: 5000, Reason: "firmware"}
	if n, err := st.StartWindow(ctx, w, 2, 1000, 0); err != nil || n != 1 {
		t.Fatalf("start w1: %d %v", n, err)
	}
	if _, err := st.StartWindow(ctx, w, 2, 1000, 0); err == nil {
		t.Fatal("a taken id was accepted")
	}
	w2 := shard.Window{ID: "w2", Match: shard.WindowMatch{Devices: []string{"a", "b"}}, FromMs: 1000, UntilMs: 3000}
	if _, err := st.StartWindow(ctx, w2, 2, 1000, 0); err != nil {
		t.Fatal(err)
	}
	w3 := shard.Window{ID: "w3", Match: shard.WindowMatch{Class: "meter"}, FromMs: 1000, UntilMs: 9000}
	if n, err := st.StartWindow(ctx, w3, 2, 1000, 0); !errors.Is(err, shard.ErrTooManyWindows) || n != 2 {
		t.Fatalf("third open window: %d %v, want refused with 2 open", n, err)
	}
	// w2 ended by its time at 3000: w3 fits then.
	if _, err := st.StartWindow(ctx, w3, 2, 3000, 0); err != nil {
		t.Fatalf("start w3 after w2 ended: %v", err)
	}
	ended, err := st.EndWindow(ctx, "w1", 4000)
	if err != nil || ended.EndedAtMs != 4000 || ended.EndMs() != 4000 || ended.Match.Prefix != "rack-7/" {
		t.Fatalf("end w1: %+v %v", ended, err)
	}
	if _, err := st.EndWindow(ctx, "w1", 4100); !errors.Is(err, shard.ErrWindowEnded) {
		t.Fatalf("ending w1 again: %v", err)
	}
	if _, err := st.EndWindow(ctx, "nope", 4100); !errors.Is(err, shard.ErrNoWindow) {
		t.Fatalf("ending an unknown window: %v", err)
	}
	v, ws, err := st.Windows(ctx)
	if err != nil || v != 4 || len(ws) != 3 {
		t.Fatalf("windows: version %d, %d windows, %v; want 4 and 3", v, len(ws), err)
	}
	byID := map[string]shard.Window{}
	for _, w := range ws {
		byID[w.ID] = w
	}
	if byID["w1"].EndedAtMs != 4000 || byID["w1"].OpenAt(4500) || !byID["w3"].OpenAt(4500) || byID["w2"].OpenAt(3000) {
		t.Fatalf("windows %+v", byID)
	}
	// Ended windows are dropped once past their keeping.
	w4 := shard.Window{ID: "w4", Match: shard.WindowMatch{Prefix: "x"}, FromMs: 5000, UntilMs: 6000}
	if _, err := st.StartWindow(ctx, w4, 10, 5000, 4500); err != nil {
		t.Fatal(err)
	}
	if _, ws, _ = st.Windows(ctx); len(ws) != 2 {
		t.Fatalf("after pruning: %d windows, want w1 and w2 gone, w3 and w4 kept", len(ws))
	}
}

// A held device moves only while its score is the one read, and counts as
// held while its score is still the one its record names.
func TestHeldMovesOnlyUnchangedDevicesAndCountsParkedOnes(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	rdb := st.Client()
	key := st.Keys().Deadlines(0)
	for k := 0; k < 3; k++ {
		rdb.ZAdd(ctx, key, redisZ(float64(100+k), "d"+strconv.Itoa(k)))
	}
	moves := []shard.HeldMove{
		{ID: "d0", From: 100, Record: shard.HeldRecord{Stage: shard.HeldParked, Score: 5000, TimeoutMs: 30000, Window: "w1"}},
		{ID: "d1", From: 999, Record: shard.HeldRecord{Stage: shard.HeldParked, Score: 5000, TimeoutMs: 30000, Window: "w1"}},
		{ID: "d2", From: 102, Record: shard.HeldRecord{Stage: shard.HeldParked, Score: 6000, TimeoutMs: 1000, Window: "w2"}},
	}
	if n, err := st.MoveHeld(ctx, 0, moves); err != nil || n != 2 {
		t.Fatalf("moved %d %v, want d0 and d2 (d1's score changed)", n, err)
	}
	if s := rdb.ZScore(ctx, key, "d1").Val(); s != 101 {
		t.Fatalf("d1 moved to %v", s)
	}
	recs, oks, err := st.HeldRecords(ctx, 0, []string{"d0", "d1", "d2"})
	if err != nil || !oks[0] || oks[1] || recs[0] != moves[0].Record || recs[2].Window != "w2" {
		t.Fatalf("records %+v %v %v", recs, oks, err)
	}
	rdb.ZAdd(ctx, key, redisZ(7000, "d2")) // d2 beat again: no longer held
	counts, err := st.HeldCounts(ctx, 1)
	if err != nil || counts["w1"] != 1 || counts["w2"] != 0 {
		t.Fatalf("held counts %v %v, want w1:1", counts, err)
	}
	ids, parked, err := st.ParkedBy(ctx, 0, "w1")
	if err != nil || len(ids) != 1 || ids[0] != "d0" || parked[0].Score != 5000 {
		t.Fatalf("parked by w1: %v %+v %v", ids, parked, err)
	}
	// d2's record no longer stands: pruned; d0's stays.
	if n, err := st.PruneHeld(ctx, 0, 1); err != nil || n != 1 {
		t.Fatalf("pruned %d %v, want d2's record", n, err)
	}
	if _, oks, _ := st.HeldRecords(ctx, 0, []string{"d0", "d2"}); !oks[0] || oks[1] {
		t.Fatalf("after pruning: records %v, want d0's only", oks)
	}
}

// On a Redis Cluster, a window's keys share one slot and a held device's
// keys its shard's: starting, ending, moving and counting work there too.
func TestMaintenanceOnACluster(t *testing.T) {
	t.Parallel()
	st := shard.NewStore(testenv.RedisCluster(t, 3).Client(t), shard.NewKeys(testenv.Prefix(t)))
	ctx := testenv.Context(t, 30*time.Second)
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	w := shard.Window{ID: "w1", Match: shard.WindowMatch{Prefix: "p"}, FromMs: 1000, UntilMs: 9000}
	if _, err := st.StartWindow(ctx, w, 10, 1000, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EndWindow(ctx, "w1", 2000); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		id := "d" + strconv.Itoa(i)
		st.Client().ZAdd(ctx, st.Keys().Deadlines(i), redisZ(100, id))
		m := shard.HeldMove{ID: id, From: 100, Record: shard.HeldRecord{Stage: shard.HeldParked, Score: 9000, TimeoutMs: 1, Window: "w1"}}
		if n, err := st.MoveHeld(ctx, i, []shard.HeldMove{m}); err != nil || n != 1 {
			t.Fatalf("shard %d: moved %d, %v", i, n, err)
		}
	}
	counts, err := st.HeldCounts(ctx, 8)
	if err != nil || counts["w1"] != 8 {
		t.Fatalf("held counts %v, %v", counts, err)
	}
	if _, ws, err := st.Windows(ctx); err != nil || len(ws) != 1 || ws[0].EndedAtMs != 2000 {
		t.Fatalf("windows %+v %v", ws, err)
	}
}
