package shard_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/shard"
)

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// TestHoldSpansItsStallsAndEndsWithTheLast walks the storm guard's state
// through a hold over two partitions: the hold starts at the lower cap,
// lasts while either is stalled, and its end is kept for re-entry, with a
// storm named when it lasted long enough.
func TestHoldSpansItsStallsAndEndsWithTheLast(t *testing.T) {
	st, ctx := newStore(t)
	if ok, err := st.MarkStalled(ctx, 3, 1000, 900, 50, "h1"); err != nil || !ok {
		t.Fatalf("mark 3: %v %v", ok, err)
	}
	if ok, err := st.MarkStalled(ctx, 3, 1100, 1000, 50, "h2"); err != nil || ok {
		t.Fatalf("marking a stalled partition again: %v %v, want false", ok, err)
	}
	if _, err := st.MarkStalled(ctx, 5, 1200, 800, 70, "h3"); err != nil {
		t.Fatal(err)
	}
	gs, err := st.ReadGate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Hold == nil || gs.Hold.FromMs != 800 || gs.Hold.SinceMs != 1000 || gs.Hold.ID != "h1" || gs.Hold.Expired {
		t.Fatalf("hold %+v, want from 800 since 1000 id h1", gs.Hold)
	}
	if len(gs.Stalls) != 2 || gs.Stalls[5].HWM != 70 || gs.Stalls[3].CapMs != 900 {
		t.Fatalf("stalls %+v", gs.Stalls)
	}
	if ended, err := st.EndStall(ctx, 3, 5000, 0, time.Second, "s1"); err != nil || ended {
		t.Fatalf("end 3: %v %v, want the hold to go on", ended, err)
	}
	if ended, err := st.EndStall(ctx, 5, 9000, 0, time.Second, "s1"); err != nil || !ended {
		t.Fatalf("end 5: %v %v, want the hold ended", ended, err)
	}
	gs, err = st.ReadGate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Hold != nil || len(gs.Stalls) != 0 {
		t.Fatalf("after the last stall ended: hold %+v stalls %+v", gs.Hold, gs.Stalls)
	}
	if len(gs.Held) != 1 || gs.Held[0] != (shard.Held{ID: "h1", FromMs: 800, EndMs: 9000}) {
		t.Fatalf("held %+v, want h1 from 800 to 9000", gs.Held)
	}
	if gs.Storm == nil || gs.Storm.ID != "s1" || gs.Storm.StartedMs != 9000 || gs.Storm.Announced {
		t.Fatalf("storm %+v, want s1 named at the hold's end", gs.Storm)
	}
	if ended, err := st.EndStall(ctx, 5, 9100, 0, time.Second, "s2"); err != nil || ended {
		t.Fatalf("ending a partition that is not stalled: %v %v", ended, err)
	}
}

// TestShortHoldNamesNoStorm: a hold shorter than the shortest timeout held
// no deadline of a device beating on time; it is kept for re-entry but
// names no storm.
func TestShortHoldNamesNoStorm(t *testing.T) {
	st, ctx := newStore(t)
	if _, err := st.MarkStalled(ctx, 0, 1000, 900, 1, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EndStall(ctx, 0, 1400, 0, time.Second, "s"); err != nil {
		t.Fatal(err)
	}
	gs, err := st.ReadGate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Storm != nil || len(gs.Held) != 1 {
		t.Fatalf("storm %+v held %+v, want no storm and the hold kept", gs.Storm, gs.Held)
	}
}

// TestExpiredHoldNamesAStormAndIsNotReentered: once every stall expired,
// the hold no longer caps firing and a storm is named in the same step; its
// end keeps no record for re-entry (its deadlines fired).
func TestExpiredHoldNamesAStormAndIsNotReentered(t *testing.T) {
	st, ctx := newStore(t)
	for _, p := range []int{1, 2} {
		if _, err := st.MarkStalled(ctx, p, 1000, 900, 1, "h"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := st.ExpireStalls(ctx, "s", 2000, 1); err != nil || n != 1 {
		t.Fatalf("expire 1: %d %v", n, err)
	}
	gs, _ := st.ReadGate(ctx)
	if gs.Hold.Expired || gs.Storm != nil {
		t.Fatalf("one of two stalls expired: hold %+v storm %+v, want the hold still on", gs.Hold, gs.Storm)
	}
	if n, err := st.ExpireStalls(ctx, "s", 3000); err != nil || n != 1 {
		t.Fatalf("expire all: %d %v", n, err)
	}
	gs, _ = st.ReadGate(ctx)
	if !gs.Hold.Expired || gs.Storm == nil || gs.Storm.ID != "s" || !gs.Stalls[1].Expired || !gs.Stalls[2].Expired {
		t.Fatalf("all expired: hold %+v storm %+v stalls %+v", gs.Hold, gs.Storm, gs.Stalls)
	}
	for _, p := range []int{1, 2} {
		if _, err := st.EndStall(ctx, p, 4000, 0, time.Second, "s2"); err != nil {
			t.Fatal(err)
		}
	}
	gs, _ = st.ReadGate(ctx)
	if gs.Hold != nil || len(gs.Held) != 0 || gs.Storm.ID != "s" {
		t.Fatalf("after an expired hold ended: hold %+v held %+v storm %+v", gs.Hold, gs.Held, gs.Storm)
	}
}

// TestReenterMovesOnlyUnchangedMembers: a member whose score changed since
// it was read (a heartbeat came) keeps its newer score.
func TestReenterMovesOnlyUnchangedMembers(t *testing.T) {
	st, ctx := newStore(t)
	rdb := st.Client()
	key := st.Keys().Deadlines(0)
	old := shard.Score(shard.Epoch+1000, 0)
	if err := rdb.ZAdd(ctx, key, redisZ(old, "a"), redisZ(old, "b")).Err(); err != nil {
		t.Fatal(err)
	}
	beat := shard.Score(shard.Epoch+5000, 0)
	if err := rdb.ZAdd(ctx, key, redisZ(beat, "b")).Err(); err != nil {
		t.Fatal(err)
	}
	again := shard.Score(shard.Epoch+3000, 0)
	n, err := st.Reenter(ctx, 0, []shard.Member{{ID: "a", Score: old}, {ID: "b", Score: old}}, []float64{again, again})
	if err != nil || n != 1 {
		t.Fatalf("reenter: %d %v, want 1", n, err)
	}
	for id, want := range map[string]float64{"a": again, "b": beat} {
		if got, _, _ := st.Score(ctx, 0, id); got != want {
			t.Errorf("%s: score %v, want %v", id, got, want)
		}
	}
}
