package ingest

import (
	"strconv"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm"
)

// guardAt is a stall guard over partitions 0 and 1 on a clock the test
// moves.
func guardAt(now *time.Time, inherited map[int]shard.Traffic) *stallGuard {
	in := &Ingest{opts: Options{Now: func() time.Time { return *now }, Storm: storm.DefaultConfig()}}
	return newStallGuard(in, inherited, nil, []int{0, 1})
}

func observed(prefix string, n int, at time.Time) []kfetch.Record {
	out := make([]kfetch.Record, n)
	for i := range out {
		out[i] = kfetch.Record{Offset: int64(i), Time: at, Key: []byte(prefix + strconv.Itoa(i))}
	}
	return out
}

// TestBusyPartitionsWatermarkStaysNearItsLastRecord: a partition whose
// records come from storm.min_devices devices is capped at its last
// record + stall_after; one with fewer devices is not capped at all.
func TestBusyPartitionsWatermarkStaysNearItsLastRecord(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	g := guardAt(&now, nil)
	g.observe(0, observed("busy-", 150, now), now.UnixMilli())
	g.observe(1, observed("quiet-", 40, now), now.UnixMilli())
	later := now.Add(10 * time.Second).UnixMilli()
	wms := map[int]int64{0: later, 1: later}
	g.capAt(wms)
	if want := now.UnixMilli() + storm.DefaultConfig().StallAfter.Milliseconds(); wms[0] != want {
		t.Errorf("busy partition capped at %d, want its last record + stall_after = %d", wms[0], want)
	}
	if wms[1] != later {
		t.Errorf("quiet partition capped at %d, want it left at %d", wms[1], later)
	}
}

// TestThresholdIsFiveUsualGapsWhenLonger: a partition whose records arrive
// in rounds every 200 ms, however many each round carries, may stand still
// for a second (five gaps) before it is stalled; one whose records arrive
// at every probe for stall_after.
func TestThresholdIsFiveUsualGapsWhenLonger(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	g := guardAt(&now, nil)
	window := storm.DefaultConfig().Window
	var slow, fast int64
	// One window of probes every 10 ms, and one more to roll it over:
	// partition 0 grows every 200 ms, partition 1 at every probe.
	for ms := int64(0); ms <= window.Milliseconds(); ms += 10 {
		at := now.UnixMilli() + ms
		if ms%200 == 0 {
			slow += 500
		}
		fast += 10
		g.sawHWM(0, g.parts[0], slow, at)
		g.sawHWM(1, g.parts[1], fast, at)
	}
	next := now.Add(window).UnixMilli()
	for p, want := range map[int]int64{0: 1000, 1: storm.DefaultConfig().StallAfter.Milliseconds()} {
		tr := g.parts[p]
		if got := g.threshold(p, tr, next); got != want {
			t.Errorf("partition %d: threshold %d ms, want %d", p, got, want)
		}
	}
}

// TestNewOwnerTakesItsFormerOwnersWord: before it saw a window of its own,
// a new owner caps a partition its former owner found busy, at the former
// owner's last record + stall_after.
func TestNewOwnerTakesItsFormerOwnersWord(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	last := now.Add(-3 * time.Second).UnixMilli()
	g := guardAt(&now, map[int]shard.Traffic{0: {LastRecordMs: last, HWM: 500, ThresholdMs: 700, Busy: true}})
	wms := map[int]int64{0: now.UnixMilli(), 1: now.UnixMilli()}
	g.capAt(wms)
	if want := last + storm.DefaultConfig().StallAfter.Milliseconds(); wms[0] != want {
		t.Errorf("partition 0 capped at %d, want the former owner's last record + stall_after = %d", wms[0], want)
	}
	if wms[1] != now.UnixMilli() {
		t.Errorf("partition 1 (no former word) capped at %d", wms[1])
	}
}

// TestHoldingOffCapsNothing: storm.max_hold 0 is flatline without the guard.
func TestHoldingOffCapsNothing(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	g := guardAt(&now, nil)
	g.cfg.MaxHold = 0
	g.observe(0, observed("busy-", 150, now), now.UnixMilli())
	later := now.Add(time.Minute).UnixMilli()
	wms := map[int]int64{0: later}
	g.capAt(wms)
	if wms[0] != later {
		t.Errorf("capped at %d with holding off", wms[0])
	}
}

// TestRoundsThatTakeAWhileToLandAreNotStalls: a busy partition whose
// records come in rounds every second, each landing over 300 ms (probes
// 10 ms apart find it grown thirty times, then it stands still 710 ms), is
// not stalled between rounds, yet an outage of a few seconds still is.
func TestRoundsThatTakeAWhileToLandAreNotStalls(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	start := now.UnixMilli()
	g := guardAt(&now, nil)
	tr := g.parts[0]
	var hwm int64
	for ms := int64(0); ms < 2*storm.DefaultConfig().Window.Milliseconds(); ms += 10 {
		at := start + ms
		now = time.UnixMilli(at)
		if ms%1000 < 300 {
			g.observe(0, observed("dev-", 150, now), at)
			hwm += 150
		}
		g.sawHWM(0, tr, hwm, at)
	}
	th := g.threshold(0, tr, now.UnixMilli())
	if th <= 710 {
		t.Errorf("threshold %d ms: the 710 ms between rounds would be a stall", th)
	}
	if th > 3000 {
		t.Errorf("threshold %d ms: an outage of 3 s would go unseen", th)
	}
	t.Logf("rounds every second, landing over 300 ms: threshold %d ms", th)
}

// TestNewOwnerKeepsItsFormerOwnersThresholdForAWindow: a partition fed in
// rounds a second apart, whose former owner learned a 5 s threshold, is
// not found stalled between two rounds by a new owner that has seen only
// one round land (ten probes finding it grown within 100 ms).
func TestNewOwnerKeepsItsFormerOwnersThresholdForAWindow(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	start := now.UnixMilli()
	g := guardAt(&now, map[int]shard.Traffic{0: {LastRecordMs: start - 900, HWM: 1000, ThresholdMs: 5000, Busy: true}})
	tr := g.parts[0]
	for k := int64(1); k <= 10; k++ {
		at := start + 10*k
		g.observe(0, observed("dev-", 150, time.UnixMilli(at)), at)
		g.sawHWM(0, tr, 1000+150*k, at)
	}
	if th := g.threshold(0, tr, start+900); th < 5000 {
		t.Errorf("threshold %d ms after one round, want the former owner's 5000 ms", th)
	}
}
