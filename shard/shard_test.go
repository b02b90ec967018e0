package shard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

func TestScoreRoundTrip(t *testing.T) {
	t.Parallel()
	f := func(rel uint64, class uint16, override, padded bool) bool {
		deadline := shard.Epoch + int64(rel%(1<<41))
		var flags shard.Meta
		if override {
			flags |= shard.FlagOverride
		}
		if padded {
			flags |= shard.FlagPadded
		}
		m := shard.NewMeta(int(class)%(shard.MaxClassID+1), flags)
		d, got := shard.DecodeScore(shard.Score(deadline, m))
		return d == deadline && got == m
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 10000}); err != nil {
		t.Fatal(err)
	}
}

func TestScoreOrdersByDeadline(t *testing.T) {
	t.Parallel()
	// A later deadline always has a larger score, whatever the meta, so
	// ZADD GT means "only ever later" and MaxScore bounds "due by t".
	f := func(a, b uint32, ma, mb uint16) bool {
		da, db := shard.Epoch+int64(a), shard.Epoch+int64(b)
		sa := shard.Score(da, shard.Meta(ma)&0xfff)
		sb := shard.Score(db, shard.Meta(mb)&0xfff)
		if da < db && !(sa < sb) {
			return false
		}
		return sa <= shard.MaxScore(da) && (da == db || sb > shard.MaxScore(da) == (db > da))
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 10000}); err != nil {
		t.Fatal(err)
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= shard.MaxShards; n *= 2 {
		if !shard.ValidCount(n) {
			t.Fatalf("ValidCount(%d) = false", n)
		}
		for k := 0; k < 2000; k++ {
			h := r.Uint64()
			i := shard.Of(h, n)
			if i < 0 || i >= n {
				t.Fatalf("Of(%x, %d) = %d out of range", h, n, i)
			}
			// Doubling moves a device from i to i+n exactly when h&n != 0.
			if n < shard.MaxShards {
				j := shard.Of(h, 2*n)
				want := i
				if h&uint64(n) != 0 {
					want = i + n
				}
				if j != want {
					t.Fatalf("Of(%x, %d) = %d, want %d", h, 2*n, j, want)
				}
			}
			// So doublings compose: from any count up to the most
			// shards, the shard only gains the hash's next bits.
			if n == shard.MaxShards && i != int(h&(shard.MaxShards-1)) {
				t.Fatalf("Of(%x, %d) = %d, want the hash's low bits %d", h, n, i, h&(shard.MaxShards-1))
			}
		}
	}
	for _, bad := range []int{0, -1, 3, 12, 8192, 4095} {
		if shard.ValidCount(bad) {
			t.Errorf("ValidCount(%d) = true", bad)
		}
	}
	if shard.Hash("d-42") != shard.Hash("d-42") || shard.Hash("d-42") == shard.Hash("d-43") {
		t.Error("hash is not a stable function of the id")
	}
}

// newStore returns a store on a redis-server of the test's own and the
// context of the test's calls to it, cancelled when the test ends (after
// 30 s at the most).
func newStore(t *testing.T) (*shard.Store, context.Context) {
	t.Helper()
	st, _ := testenv.Store(t)
	return st, testenv.Context(t, 30*time.Second)
}

// fire fires device id of shard i at score, as a scanner does, and fails
// the test unless it fired.
func fire(ctx context.Context, t *testing.T, st *shard.Store, i int, id string, score float64) {
	t.Helper()
	if n, _, err := st.Fired(ctx, i, []shard.Member{{ID: id, Score: score}}, 0); err != nil || n != 1 {
		t.Fatalf("fire %s in shard %d: %d, %v", id, i, n, err)
	}
}

// write writes devices ids to shard i at score, as one batch of heartbeats
// without a timeout of their own.
func write(ctx context.Context, t *testing.T, st *shard.Store, i int, score float64, ids ...string) {
	t.Helper()
	var b shard.Batch
	b.Reset(i + 1)
	for _, id := range ids {
		b.Add(i, id, score, 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
}

// writeAndFire writes device id to shard i at score and fires it: the
// device is then down in shard i.
func writeAndFire(ctx context.Context, t *testing.T, st *shard.Store, i int, id string, score float64) {
	t.Helper()
	write(ctx, t, st, i, score, id)
	fire(ctx, t, st, i, id, score)
}

// A late, replayed or out-of-order heartbeat never moves a deadline earlier.
func TestWriteNeverMovesDeadlineEarlier(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	r := rand.New(rand.NewPCG(3, 4))
	const devices = 50
	max := make(map[string]float64)
	var b shard.Batch
	for round := 0; round < 40; round++ {
		b.Reset(4)
		for d := 0; d < devices; d++ {
			if r.IntN(2) == 0 {
				continue
			}
			id := "dev-" + string(rune('A'+d%26)) + string(rune('a'+d/26))
			// Deadlines jump back and forth: late and replayed heartbeats.
			score := shard.Score(shard.Epoch+1_000_000+int64(r.IntN(10_000)), shard.NewMeta(r.IntN(3), 0))
			b.Add(shard.Of(shard.Hash(id), 4), id, score, 0)
			if score > max[id] {
				max[id] = score
			}
		}
		if _, err := st.Write(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range max {
		got, ok, err := st.Score(ctx, shard.Of(shard.Hash(id), 4), id)
		if err != nil || !ok {
			t.Fatalf("%s not tracked: %v", id, err)
		}
		if got != want {
			t.Errorf("%s: score %v, want the maximum written %v", id, got, want)
		}
	}
}

func TestFiredIsConditionalAndRecoveryDetected(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	old := shard.Score(shard.Epoch+5000, 0)
	write(ctx, t, st, 0, old, "a", "b")
	due, err := st.Due(ctx, 0, shard.MaxScore(shard.Epoch+5000), 0, 20)
	if err != nil || len(due) != 2 {
		t.Fatalf("due = %v, %v; want a and b", due, err)
	}
	// "b" is reset between the scan and the removal.
	newer := shard.Score(shard.Epoch+9000, 0)
	write(ctx, t, st, 0, newer, "b")
	n, raced, err := st.Fired(ctx, 0, due, 0)
	if err != nil || n != 1 {
		t.Fatalf("Fired removed %d (%v), want only a", n, err)
	}
	if len(raced) != 1 || raced[0] != (shard.Raced{ID: "b", FiredScore: old, Score: newer}) {
		t.Fatalf("raced = %+v, want b moved from %v to %v", raced, old, newer)
	}
	if _, ok, _ := st.DownScore(ctx, 0, "b"); ok {
		t.Fatal("b, reset after its deadline, remembered as down: its next beat would count as a second recovery")
	}
	if s, ok, _ := st.Score(ctx, 0, "b"); !ok || s != newer {
		t.Fatalf("b's reset was lost: %v %v", s, ok)
	}
	if _, ok, _ := st.DownScore(ctx, 0, "a"); !ok {
		t.Fatal("a not remembered as down")
	}
	// A replayed heartbeat older than the timeout is no recovery, and does
	// not bring the fired silence back to fire again ...
	var b shard.Batch
	b.Reset(1)
	b.Add(0, "a", shard.Score(shard.Epoch+4000, 0), 0)
	back, err := st.Write(ctx, &b)
	if err != nil || len(back) != 0 {
		t.Fatalf("replay reported recovery %v (%v)", back, err)
	}
	if _, ok, _ := st.Score(ctx, 0, "a"); ok {
		t.Fatal("a replayed heartbeat re-tracked a device that already timed out")
	}
	// ... a newer one is, once.
	b.Reset(1)
	b.Add(0, "a", shard.Score(shard.Epoch+20000, 0), 0)
	back, err = st.Write(ctx, &b)
	if err != nil || len(back) != 1 || back[0].ID != "a" || back[0].DownScore != old {
		t.Fatalf("recovery = %v (%v), want a down since %v", back, err, old)
	}
	back, _ = st.Write(ctx, &b)
	if len(back) != 0 {
		t.Fatalf("second recovery reported: %v", back)
	}
	if s, ok, _ := st.Score(ctx, 0, "a"); !ok || s != shard.Score(shard.Epoch+20000, 0) {
		t.Fatalf("recovered device not tracked again: %v %v", s, ok)
	}
}

// Fired removes exactly the members still at the score the scan read,
// wherever the changed ones sit in the batch; it remembers the others as
// down and reports the changed ones.
func TestFiredRemovesOnlyUnchanged(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	read := shard.Score(shard.Epoch+5000, 3)
	write(ctx, t, st, 0, read, "changed", "same-1", "same-2", "changed-2", "same-3")
	later := shard.Score(shard.Epoch+9000, 3)
	write(ctx, t, st, 0, later, "changed", "changed-2")
	var scanned []shard.Member
	for _, id := range []string{"changed", "same-1", "gone", "same-2", "changed-2", "same-3"} {
		scanned = append(scanned, shard.Member{ID: id, Score: read})
	}
	n, raced, err := st.Fired(ctx, 0, scanned, 0)
	if err != nil || n != 3 {
		t.Fatalf("Fired removed %d (%v), want the 3 unchanged", n, err)
	}
	if len(raced) != 2 || raced[0].ID != "changed" || raced[1].ID != "changed-2" || raced[0].Score != later || raced[0].FiredScore != read {
		t.Fatalf("raced = %+v, want changed and changed-2 at %v", raced, later)
	}
	for _, id := range []string{"same-1", "same-2", "same-3"} {
		if _, ok, _ := st.Score(ctx, 0, id); ok {
			t.Errorf("%s still tracked", id)
		}
	}
	for _, id := range []string{"changed", "changed-2"} {
		if s, ok, _ := st.Score(ctx, 0, id); !ok || s != later {
			t.Errorf("%s: reset lost (%v %v)", id, s, ok)
		}
	}
	for _, m := range scanned {
		d, ok, _ := st.DownScore(ctx, 0, m.ID)
		if strings.HasPrefix(m.ID, "changed") {
			if ok {
				t.Errorf("%s, reset meanwhile, remembered as down", m.ID)
			}
		} else if !ok || d != read {
			t.Errorf("%s not remembered as down at the fired score (%v %v)", m.ID, d, ok)
		}
	}
}

// Fired checks a run of members fired at one score by rank, without
// reading their scores (ZMSCORE), and still removes exactly the unchanged
// ones whatever happened to the run meanwhile: a member reset, a member
// gone, a new member between them or before them at that score, all reset.
func TestFiredChecksARunOfOneScoreByRank(t *testing.T) {
	t.Parallel()
	read := shard.Score(shard.Epoch+5000, 3)
	later := shard.Score(shard.Epoch+9000, 3)
	earlier := shard.Score(shard.Epoch+1000, 3)
	for _, c := range []struct {
		name   string
		before map[string]float64 // written after the scan read the run
		gone   string             // removed after the scan read the run
		raced  []string
		byRank bool // no score read: the run is unchanged
		// short: the scan read two members at an earlier score before
		// the run (a run too short to check by rank), q-2 since reset.
		short bool
	}{
		{name: "unchanged", byRank: true},
		{name: "one member earlier in the shard", before: map[string]float64{"a": earlier}, byRank: true},
		{name: "one reset", before: map[string]float64{"r-05": later}, raced: []string{"r-05"}},
		{name: "a new member inside the run", before: map[string]float64{"r-05x": read}},
		{name: "one gone", gone: "r-03"},
		{name: "a short run before it, reset", short: true, before: map[string]float64{"q-2": later}, raced: []string{"q-2"}},
		{name: "all reset", before: func() map[string]float64 {
			m := map[string]float64{}
			for k := range 12 {
				m[fmt.Sprintf("r-%02d", k)] = later
			}
			return m
		}(), raced: []string{"r-00", "r-01", "r-02", "r-03", "r-04", "r-05", "r-06", "r-07", "r-08", "r-09", "r-10", "r-11"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st, srv := testenv.Store(t)
			ctx := context.Background()
			var b shard.Batch
			b.Reset(1)
			var run []shard.Member
			if c.short {
				for _, id := range []string{"q-1", "q-2"} {
					b.Add(0, id, earlier, 0)
					run = append(run, shard.Member{ID: id, Score: earlier})
				}
			}
			for k := range 12 {
				id := fmt.Sprintf("r-%02d", k)
				b.Add(0, id, read, 0)
				run = append(run, shard.Member{ID: id, Score: read})
			}
			if _, err := st.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			b.Reset(1)
			for id, score := range c.before {
				b.Add(0, id, score, 0)
			}
			if _, err := st.Write(ctx, &b); err != nil {
				t.Fatal(err)
			}
			if c.gone != "" {
				if n, _, err := st.Fired(ctx, 0, []shard.Member{{ID: c.gone, Score: read}}, 0); err != nil || n != 1 {
					t.Fatalf("removing %s: %d, %v", c.gone, n, err)
				}
			}
			zmscores := func() string {
				for _, l := range strings.Split(srv.Client(t).Info(ctx, "commandstats").Val(), "\n") {
					if strings.HasPrefix(l, "cmdstat_zmscore:") {
						return strings.Split(l, ",")[0]
					}
				}
				return "none"
			}
			calls := zmscores()
			n, raced, err := st.Fired(ctx, 0, run, 0)
			if err != nil {
				t.Fatal(err)
			}
			var racedIDs []string
			for _, r := range raced {
				racedIDs = append(racedIDs, r.ID)
			}
			want := len(run) - len(c.raced)
			if c.gone != "" {
				want--
			}
			if n != want || fmt.Sprint(racedIDs) != fmt.Sprint(c.raced) {
				t.Fatalf("removed %d, raced %v; want %d, raced %v", n, racedIDs, want, c.raced)
			}
			for _, m := range run {
				if _, ok, _ := st.Score(ctx, 0, m.ID); ok != (c.before[m.ID] == later) {
					t.Errorf("%s tracked: %v", m.ID, ok)
				}
			}
			for id, score := range c.before {
				if s, ok, _ := st.Score(ctx, 0, id); !ok || s != score {
					t.Errorf("%s: %v %v, want kept at %v", id, s, ok, score)
				}
			}
			if byRank := zmscores() == calls; byRank != c.byRank {
				t.Errorf("checked by rank: %v, want %v (zmscore %s → %s)", byRank, c.byRank, calls, zmscores())
			}
		})
	}
}

// While the layout migrates, a device that timed out in its shard under the
// previous count and beats again in its new shard is a recovery, once; a
// replay of it there is removed again. (Its down entry is in the other
// shard's down set: AddMoved looks there too.)
func TestRecoveryAcrossAMigration(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	l := shard.Layout{Count: 32, Previous: 16}
	var ids []string
	for k := 0; len(ids) < 2; k++ {
		id := fmt.Sprintf("moving-%d", k)
		if _, moved := l.PreviousOf(shard.Hash(id)); moved {
			ids = append(ids, id)
		}
	}
	back, replay := ids[0], ids[1]
	old := shard.Score(shard.Epoch+5000, 0)
	var b shard.Batch
	b.Reset(32)
	for _, id := range ids {
		b.Add(shard.Of(shard.Hash(id), 16), id, old, 0)
	}
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		fire(ctx, t, st, shard.Of(shard.Hash(id), 16), id, old)
	}

	write := func(id string, score float64) []shard.Recovered {
		t.Helper()
		h := shard.Hash(id)
		prev, _ := l.PreviousOf(h)
		b.Reset(32)
		b.AddMoved(l.ShardOf(h), prev, id, score, 0)
		got, err := st.Write(ctx, &b)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	newer := shard.Score(shard.Epoch+20000, 0)
	got := write(back, newer)
	prev := shard.Of(shard.Hash(back), 16)
	if len(got) != 1 || got[0] != (shard.Recovered{Shard: prev, ID: back, DownScore: old}) {
		t.Fatalf("recovery = %+v, want %s down in shard %d since %v", got, back, prev, old)
	}
	if _, ok, _ := st.DownScore(ctx, prev, back); ok {
		t.Errorf("%s still down in shard %d after its recovery", back, prev)
	}
	if again := write(back, newer); len(again) != 0 {
		t.Errorf("second recovery reported: %+v", again)
	}
	if s, ok, _ := st.Score(ctx, l.ShardOf(shard.Hash(back)), back); !ok || s != newer {
		t.Errorf("%s not tracked in its new shard: %v %v", back, s, ok)
	}

	if got := write(replay, shard.Score(shard.Epoch+4000, 0)); len(got) != 0 {
		t.Errorf("replay reported as recovery: %+v", got)
	}
	if _, ok, _ := st.Score(ctx, l.ShardOf(shard.Hash(replay)), replay); ok {
		t.Errorf("a replay of %s, which timed out in its previous shard, is tracked in its new one", replay)
	}
}

// Two batches written side by side settle in their order: the later one,
// although its writes went first, waits to settle what its look at the
// down set found until the earlier one is done — so a device back after its
// timeout is the earlier batch's recovery, as if written one after the other.
func TestWriteAfterSettlesInBatchOrder(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	old := shard.Score(shard.Epoch+5000, 0)
	writeAndFire(ctx, t, st, 0, "d", old)
	var first, second shard.Batch
	first.Reset(1)
	first.Add(0, "d", shard.Score(shard.Epoch+20000, 0), 0)
	second.Reset(1)
	second.Add(0, "d", shard.Score(shard.Epoch+21000, 0), 0)

	firstDone := make(chan struct{})
	type result struct {
		back []shard.Recovered
		err  error
	}
	secondRes := make(chan result, 1)
	go func() {
		back, err := st.WriteAfter(ctx, &second, firstDone)
		secondRes <- result{back, err}
	}()
	// The second batch's round trip has read d as down (the down set
	// holds d until a settle clears it); it may not settle before the first.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok, err := st.Score(ctx, 0, "d")
		if err != nil {
			t.Fatal(err)
		}
		if ok && s == shard.Score(shard.Epoch+21000, 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second batch never wrote")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-secondRes:
		t.Fatalf("the second batch finished before the first: %+v, %v", r.back, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	back, err := st.Write(ctx, &first)
	close(firstDone)
	if err != nil || len(back) != 1 || back[0].ID != "d" {
		t.Fatalf("first batch: recovery %+v, %v; want d's", back, err)
	}
	if r := <-secondRes; r.err != nil || len(r.back) != 0 {
		t.Fatalf("second batch: recovery %+v, %v; want none (the first had it)", r.back, r.err)
	}
}

// A device deregistered and registered again within one batch ends with the
// new deadline, even an earlier one, and without its old override timeout
// or down entry: the old state is forgotten before the ZADD GT.
func TestReregisterReplacesEarlierState(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	late := shard.Score(shard.Epoch+86_400_000, shard.NewMeta(0, shard.FlagOverride))
	var b shard.Batch
	b.Reset(1)
	b.Add(0, "d", late, 86_400_000)
	b.Add(0, "gone", shard.Score(shard.Epoch+1000, 0), 0)
	if _, err := st.Write(ctx, &b); err != nil {
		t.Fatal(err)
	}
	fire(ctx, t, st, 0, "gone", shard.Score(shard.Epoch+1000, 0))
	soon := shard.Score(shard.Epoch+60_000, 0)
	b.Reset(1)
	b.Reregister(0, "d", soon, 0)
	b.Reregister(0, "gone", shard.Score(shard.Epoch+500, 0), 0)
	back, err := st.Write(ctx, &b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 0 {
		t.Errorf("a reregistration reported as recovery: %+v", back)
	}
	if s, ok, _ := st.Score(ctx, 0, "d"); !ok || s != soon {
		t.Errorf("d's deadline %v (%v), want the new, earlier %v", s, ok, soon)
	}
	if o, _ := st.Overrides(ctx, 0, []string{"d"}); len(o) != 0 {
		t.Errorf("d's old override timeout kept: %v", o)
	}
	if _, ok, _ := st.DownScore(ctx, 0, "gone"); ok {
		t.Error("a reregistered device is still remembered as down")
	}
	if _, ok, _ := st.Score(ctx, 0, "gone"); !ok {
		t.Error("a reregistered device, though older than its timeout, is not tracked")
	}
}

// A device found back in both its shards' down sets (the sweep's MoveDown
// copied the entry and has not removed the old one yet) is one recovery.
func TestRecoveryFoundInBothDownSetsIsReportedOnce(t *testing.T) {
	t.Parallel()
	st, ctx := newStore(t)
	l := shard.Layout{Count: 32, Previous: 16}
	id := ""
	for k := 0; id == ""; k++ {
		if _, moved := l.PreviousOf(shard.Hash(fmt.Sprintf("moving-%d", k))); moved {
			id = fmt.Sprintf("moving-%d", k)
		}
	}
	h := shard.Hash(id)
	prev, home := shard.Of(h, 16), l.ShardOf(h)
	old := shard.Score(shard.Epoch+5000, 0)
	writeAndFire(ctx, t, st, prev, id, old)
	// The copy half of a move: the entry is in both down sets now.
	writeAndFire(ctx, t, st, home, id, old)
	var b shard.Batch
	b.Reset(32)
	b.AddMoved(home, prev, id, shard.Score(shard.Epoch+20000, 0), 0)
	back, err := st.Write(ctx, &b)
	if err != nil || len(back) != 1 {
		t.Fatalf("recoveries %+v (%v), want one", back, err)
	}
	for _, i := range []int{prev, home} {
		if _, ok, _ := st.DownScore(ctx, i, id); ok {
			t.Errorf("still down in shard %d", i)
		}
	}
}
