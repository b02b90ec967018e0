package shard_test

import (
	"fmt"
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// A child costs at most its parent's id + 64 B more in Redis (SPEC §14),
// however long its own id: 65,600 children with 36-byte ids under gateways
// with 10-byte ids in one shard's parents HASH, a count just past a
// doubling of the hash table, its costliest (72 B each on Redis 7.0; 56 B
// at 131,000).
func TestAChildCostsItsParentsIDAndLittleMore(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	const n, parentLen = 131000, 10
	var b shard.Batch
	b.Reset(1)
	for k := range n {
		b.SetParent(0, fmt.Sprintf("%08x-0000-4000-8000-%012x", k, k), fmt.Sprintf("gw-%07d", k/100), 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	used, err := st.Client().MemoryUsage(ctx, st.Keys().Parents(0), 0).Result()
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(used) / n; per > parentLen+64 {
		t.Errorf("%.1f B per child, want at most %d (its parent's id + 64 B)", per, parentLen+64)
	} else {
		t.Logf("%.1f B per child", per)
	}
	if p, err := st.ParentOf(ctx, 0, fmt.Sprintf("%08x-0000-4000-8000-%012x", 7, 7)); err != nil || p != "gw-0000000" {
		t.Errorf("parent of child 7: %q, %v", p, err)
	}
}

// KinOf reads guessed parents in its own round trip exactly as
// ParentStates reads them: live, down, both (on two shards, as while the
// layout migrates) and absent.
func TestKinOfReadsGuessedParentsAsParentStates(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	var b shard.Batch
	b.Reset(3)
	b.SetParent(0, "child-1", "gw-live", 1)
	b.SetParent(0, "child-2", "gw-down", 1)
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	write(ctx, t, st, 1, shard.Score(5000, 0), "gw-live")
	writeAndFire(ctx, t, st, 1, "gw-down", shard.Score(3000, 0))
	writeAndFire(ctx, t, st, 2, "gw-both", shard.Score(2000, 0))
	write(ctx, t, st, 1, shard.Score(4000, 0), "gw-both")
	guess := shard.ParentReads{IDs: []string{"gw-live", "gw-down", "gw-both", "gw-none"}, Shards: [][]int{{1}, {1}, {1, 2}, {1}}}
	kin, any, _, guessed, err := st.KinOf(ctx, 0, []shard.Member{{ID: "child-1"}, {ID: "child-2"}}, nil,
		shard.KinKeys{Parents: true, Gateways: true, Holds: true}, guess)
	if err != nil {
		t.Fatal(err)
	}
	if !any || kin[0].Parent != "gw-live" || kin[1].Parent != "gw-down" {
		t.Fatalf("kin %+v (any %v), want the children's parents", kin, any)
	}
	want, err := st.ParentStates(ctx, guess.IDs, guess.Shards)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(guessed) != fmt.Sprint(want) {
		t.Fatalf("guessed parents %+v, ParentStates says %+v", guessed, want)
	}
	if !want[0].HasLive || want[0].HasDown || !want[1].HasDown || !want[2].HasLive || !want[2].HasDown || want[3].HasLive || want[3].HasDown {
		t.Fatalf("states %+v: not live / down / both / absent", want)
	}
	if _, _, _, none, err := st.KinOf(ctx, 0, []shard.Member{{ID: "child-1"}}, nil, shard.KinKeys{Parents: true}, shard.ParentReads{}); err != nil || none != nil {
		t.Fatalf("no guess: %v, %v", none, err)
	}
}
