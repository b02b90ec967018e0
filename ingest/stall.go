package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm"
)

// stallGuard is the storm guard's eye on this generation's partitions (see
// package storm). The readers tell it what records arrive (observe), the
// prober what the high-water marks are (probed); it says how far each
// partition's watermark may go (capAt) and records stalls in Redis, where
// every instance's firing gate reads them and where the partition's next
// owner finds them.
//
// A partition is busy when its recent records came from storm.min_devices
// distinct devices or more, and stalled when, busy, its high-water mark
// stood still for its threshold: storm.stall_after, or five of its usual
// gaps between records when that is longer. A busy partition's watermark
// never passes its last record's time + storm.stall_after, stalled or not:
// so the probes made between the pipe breaking and the stall's detection
// (five gaps later, for a partition whose records come in rounds) cannot
// carry the watermark past the hold's start, and a deadline later than
// stall_after after the outage's start never fires. Between the rounds of
// such a partition firing waits for the next round: late, never false.
type stallGuard struct {
	in    *Ingest
	cfg   storm.Config
	parts map[int]*traffic

	// What the former owners learned, read when the generation began.
	inherited map[int]shard.Traffic
	savedAt   time.Time
	checkedAt time.Time
}

// traffic is one partition's learned traffic and stall. The reader writes
// the record side, the prober the rest; mu guards both.
type traffic struct {
	mu sync.Mutex
	// lastRecordMs is the newest record's time (capped at its fetch).
	lastRecordMs int64
	// bucketStartMs starts cur; cur and prev count records and distinct
	// devices over storm.window each.
	bucketStartMs int64
	cur, prev     bucket
	// hwm is the high-water mark last probed, movedMs when it last grew:
	// when the probe that found it grown came back, the latest moment the
	// growth can have happened (a probe answered late must not make the
	// stillness after it look longer than it was). movedBusy: the
	// partition was busy then.
	hwm, movedMs int64
	movedBusy    bool
	// advStartMs starts the window of advCur; advCur and advPrev count the
	// probes that found the high-water mark grown, over storm.window each:
	// the partition's usual gap between records, as the prober sees them
	// arrive (threshold).
	advStartMs, advCur, advPrev int64
	// still and stillSq sum the lengths of the busy partition's still
	// spells (from one growth to the next), and their squares, over the
	// same windows as advCur and advPrev ([0] current, [1] previous).
	still, stillSq [2]int64
	// stall is the stall recorded in Redis, nil when the partition flows.
	stall *shard.Stall
}

// bucket counts a window's records and its distinct devices, up to
// storm.min_devices of them: only whether there are that many matters.
type bucket struct {
	records int64
	devices map[uint64]struct{}
}

// loadStallGuard builds the guard of a generation's partitions from what
// Redis holds of them: their traffic as their former owners saw it, and
// their stalls (a stall outlives its owner: a restart during an outage must
// not release the hold).
func (in *Ingest) loadStallGuard(ctx context.Context, partitions []int) (*stallGuard, error) {
	if !in.opts.Storm.Holding() {
		return nil, nil
	}
	traffic, err := in.opts.Store.LoadTraffic(ctx)
	if err != nil {
		return nil, err
	}
	st, err := in.opts.Store.ReadGate(ctx)
	if err != nil {
		return nil, err
	}
	return newStallGuard(in, traffic, st.Stalls, partitions), nil
}

func newStallGuard(in *Ingest, inherited map[int]shard.Traffic, stalls map[int]shard.Stall, partitions []int) *stallGuard {
	g := &stallGuard{in: in, cfg: in.opts.Storm, parts: make(map[int]*traffic, len(partitions)), inherited: inherited}
	now := in.opts.Now().UnixMilli()
	for _, p := range partitions {
		t := &traffic{bucketStartMs: now, movedMs: now, advStartMs: now}
		if old, ok := inherited[p]; ok {
			// Until records arrive, the partition stands where its former
			// owner last saw it move.
			t.lastRecordMs, t.hwm, t.movedMs = old.LastRecordMs, old.HWM, old.LastRecordMs
		}
		if st, ok := stalls[p]; ok {
			t.stall = &st
			t.hwm = max(t.hwm, st.HWM)
		}
		g.parts[p] = t
	}
	return g
}

// observe takes the records of one fetch of partition p, arrived at
// arrivedMs.
func (g *stallGuard) observe(p int, recs []kfetch.Record, arrivedMs int64) {
	if g == nil {
		return
	}
	t := g.parts[p]
	if t == nil || len(recs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	window := g.cfg.Window.Milliseconds()
	if arrivedMs-t.bucketStartMs >= window {
		if arrivedMs-t.bucketStartMs >= 2*window {
			t.prev = bucket{}
		} else {
			t.prev = t.cur
		}
		t.cur = bucket{}
		t.bucketStartMs = arrivedMs
	}
	t.cur.records += int64(len(recs))
	last := recs[len(recs)-1].Time.UnixMilli()
	t.lastRecordMs = max(t.lastRecordMs, min(last, arrivedMs))
	if len(t.cur.devices) >= g.cfg.MinDevices {
		return
	}
	if t.cur.devices == nil {
		t.cur.devices = make(map[uint64]struct{}, g.cfg.MinDevices)
	}
	for k := range recs {
		if len(recs[k].Key) > 0 {
			t.cur.devices[xxhash.Sum64(recs[k].Key)] = struct{}{}
			if len(t.cur.devices) >= g.cfg.MinDevices {
				return
			}
		}
	}
}

// busy reports whether t's recent traffic came from storm.min_devices
// devices or more; before this owner saw a full window, its former owner's
// word counts. t.mu is held.
func (g *stallGuard) busy(p int, t *traffic, nowMs int64) bool {
	min := g.cfg.MinDevices
	if len(t.cur.devices) >= min || len(t.prev.devices) >= min {
		return true
	}
	n := len(t.cur.devices)
	for d := range t.prev.devices {
		if _, ok := t.cur.devices[d]; !ok {
			n++
		}
	}
	if n >= min {
		return true
	}
	if t.prev.records == 0 && nowMs-t.bucketStartMs < g.cfg.Window.Milliseconds() {
		return g.inherited[p].Busy
	}
	return false
}

// threshold is how long t's high-water mark may stand still before it is
// stalled: storm.stall_after, or five of its usual gaps between records
// when longer. The usual gap is measured between the probes that found
// records arrived, not between records: producers that send in rounds (a
// bridge flushing every second) leave their partition still between
// rounds however many records each round carries, and that stillness is
// their usual traffic, not an outage. It is the longer of two measures:
// the mean time between such probes, and the mean still spell as seen from
// a moment taken at random (the spells' squares over their sum). The
// second is what rounds need when each takes a while to land: a round of
// 10,000 records written over 300 ms is seen grown by thirty probes 10 ms
// apart, then stands still 700 ms until the next; the mean gap between
// growths (33 ms) would call that stillness a stall, but most moments fall
// in the 700 ms spells, so the second measure is nearly 700 ms. t.mu is
// held.
func (g *stallGuard) threshold(p int, t *traffic, nowMs int64) int64 {
	th := g.cfg.StallAfter.Milliseconds()
	if t.advPrev > 0 {
		th = max(th, 5*g.cfg.Window.Milliseconds()/t.advPrev)
	} else {
		// Less than a window seen: its former owner's word counts too. A
		// new owner's first round or two say little of a partition's
		// rhythm, and rebalances come in bursts (an instance lost, another
		// joining): each owner starting from its own few probes, a
		// partition fed in rounds a second apart would be found stalled
		// between two rounds.
		if t.advCur > 0 && nowMs > t.advStartMs {
			th = max(th, 5*(nowMs-t.advStartMs)/t.advCur)
		}
		th = max(th, g.inherited[p].ThresholdMs)
	}
	if sum := t.still[0] + t.still[1]; sum > 0 {
		th = max(th, 5*(t.stillSq[0]+t.stillSq[1])/sum)
	}
	return th
}

// sawHWM takes the high-water mark a probe of partition p found, whose
// answer came back at nowMs. A still spell counts towards the usual gap
// when the partition was busy as it began and it did not end a stall: the
// idle time before a fleet starts and an outage are not usual traffic.
// t.mu is held.
func (g *stallGuard) sawHWM(p int, t *traffic, hwm, nowMs int64) {
	if hwm <= t.hwm {
		return
	}
	g.advanced(t, nowMs)
	if l := nowMs - t.movedMs; t.movedBusy && t.stall == nil && l > 0 {
		t.still[0] += l
		t.stillSq[0] += l * l
	}
	t.hwm, t.movedMs = hwm, nowMs
	t.movedBusy = g.busy(p, t, nowMs)
}

// advanced counts a probe at nowMs that found t's high-water mark grown.
// t.mu is held.
func (g *stallGuard) advanced(t *traffic, nowMs int64) {
	window := g.cfg.Window.Milliseconds()
	if nowMs-t.advStartMs >= window {
		if nowMs-t.advStartMs >= 2*window {
			t.advPrev, t.still[1], t.stillSq[1] = 0, 0, 0
		} else {
			t.advPrev, t.still[1], t.stillSq[1] = t.advCur, t.still[0], t.stillSq[0]
		}
		t.advCur, t.advStartMs, t.still[0], t.stillSq[0] = 0, nowMs, 0, 0
	}
	t.advCur++
}

// capAt lowers the watermarks in wms to what the storm guard allows.
func (g *stallGuard) capAt(wms map[int]int64) {
	if g == nil || !g.cfg.Holding() {
		return
	}
	now := g.in.opts.Now().UnixMilli()
	for p, v := range wms {
		t := g.parts[p]
		if t == nil {
			continue
		}
		t.mu.Lock()
		switch {
		case t.stall != nil && !t.stall.Expired:
			wms[p] = min(v, t.stall.CapMs)
		case t.stall != nil:
			// An expired hold: the watermark follows probes again.
		case g.busy(p, t, now):
			wms[p] = min(v, t.lastRecordMs+g.cfg.StallAfter.Milliseconds())
		}
		t.mu.Unlock()
	}
}

// probed takes the high-water marks a probe sent at sentMs found (its
// answer came back at gotMs), detects stalls and their ends, and records
// those in Redis. A partition is stalled when its high-water mark stood
// still from the answer of the probe that last found it grown to the
// sending of this one: the stillness Kafka's answers prove, however late
// they came. It runs on the
// prober's goroutine, before the probe's watermarks are capped and raised;
// the periodic round trips are maintain's, after them.
func (g *stallGuard) probed(ctx context.Context, sentMs, gotMs int64, offsets map[int]int64) {
	if g == nil || !g.cfg.Holding() {
		return
	}
	log := g.in.opts.Log
	for p, hwm := range offsets {
		t := g.parts[p]
		if t == nil {
			continue
		}
		t.mu.Lock()
		g.sawHWM(p, t, hwm, gotMs)
		stall := t.stall
		var mark *shard.Stall
		switch {
		case stall != nil && hwm > stall.HWM:
			// Records flow again: the stall ends below, in Redis first.
		case stall != nil && !stall.Expired && sentMs >= stall.SinceMs+g.cfg.MaxHold.Milliseconds():
			// Expired below.
		case stall == nil && g.busy(p, t, sentMs) && sentMs-t.movedMs >= g.threshold(p, t, sentMs):
			mark = &shard.Stall{SinceMs: sentMs, CapMs: t.lastRecordMs + g.cfg.StallAfter.Milliseconds(), HWM: t.hwm}
		}
		t.mu.Unlock()
		switch {
		case stall != nil && hwm > stall.HWM:
			keep := sentMs - heldKeep.Milliseconds()
			ended, err := g.in.opts.Store.EndStall(ctx, p, sentMs, keep, g.in.opts.Policy.Config().Min, storm.NewID(time.UnixMilli(sentMs)))
			if err != nil {
				log.Warn("cannot record the end of a stall; retrying", "partition", p, "err", err)
				continue
			}
			log.Info("records flow again on a stalled signals partition", "partition", p,
				"stalled_for", time.Duration(sentMs-stall.SinceMs)*time.Millisecond, "hold_ended", ended)
			t.mu.Lock()
			t.stall = nil
			t.mu.Unlock()
		case stall != nil && !stall.Expired && sentMs >= stall.SinceMs+g.cfg.MaxHold.Milliseconds():
			if _, err := g.in.opts.Store.ExpireStalls(ctx, storm.NewID(time.UnixMilli(sentMs)), sentMs, p); err != nil {
				log.Warn("cannot expire a hold; retrying", "partition", p, "err", err)
				continue
			}
			log.Warn("a stalled signals partition held firing for storm.max_hold: its held deadlines fire now", "partition", p, "max_hold", g.cfg.MaxHold)
			if g.in.opts.Metrics != nil {
				g.in.opts.Metrics.StormHoldsExpired.Inc()
			}
			t.mu.Lock()
			if t.stall != nil {
				t.stall.Expired = true
			}
			t.mu.Unlock()
		case mark != nil:
			if _, err := g.in.opts.Store.MarkStalled(ctx, p, mark.SinceMs, mark.CapMs, mark.HWM, storm.NewID(time.UnixMilli(sentMs))); err != nil {
				log.Warn("cannot record a stalled signals partition; its watermark stays capped", "partition", p, "err", err)
			} else {
				log.Warn("signals partition stalled: holding firing until records flow again", "partition", p,
					"silent_for", time.Duration(sentMs-t.movedMs)*time.Millisecond, "max_hold", g.cfg.MaxHold)
			}
			// Capped even when the write failed: this owner holds its own
			// partition's watermark, and tries to record it again at the
			// next probe (a stall not in Redis is marked anew).
			t.mu.Lock()
			t.stall = mark
			t.mu.Unlock()
		}
	}
}

// maintain does the guard's periodic round trips to Redis, after a probe
// sent at sentMs was raised: it re-reads the stalls now and then (refresh)
// and saves what it learned of the partitions (save).
func (g *stallGuard) maintain(ctx context.Context, sentMs int64) {
	if g == nil || !g.cfg.Holding() {
		return
	}
	g.refresh(ctx, sentMs)
	g.save(ctx, sentMs)
}

// heldKeep is how long an ended hold is kept for the scanners: every
// deadline inside it is due at its end, and read within a lease takeover.
const heldKeep = time.Hour

// refresh re-reads the stalls of this generation's partitions from Redis
// now and then: `flatline storm release` expires them there, a stall this
// owner failed to record is recorded again, and a stall a former owner
// recorded after this generation read Redis (its last probe racing the
// rebalance) is taken over.
func (g *stallGuard) refresh(ctx context.Context, nowMs int64) {
	var stalled []int
	for p, t := range g.parts {
		t.mu.Lock()
		if t.stall != nil {
			stalled = append(stalled, p)
		}
		t.mu.Unlock()
	}
	every := stallAdopt
	if len(stalled) > 0 {
		every = stallRefresh
	}
	if time.UnixMilli(nowMs).Sub(g.checkedAt) < every {
		return
	}
	st, err := g.in.opts.Store.ReadGate(ctx)
	if err != nil {
		return
	}
	g.checkedAt = time.UnixMilli(nowMs)
	for p, t := range g.parts {
		t.mu.Lock()
		mine := t.stall
		theirs, ok := st.Stalls[p]
		switch {
		case mine == nil && ok:
			adopted := theirs
			t.stall = &adopted
			t.hwm = max(t.hwm, theirs.HWM)
		case mine != nil && ok && theirs.Expired && !mine.Expired:
			mine.Expired = true
		}
		t.mu.Unlock()
		if mine != nil && !ok {
			if _, err := g.in.opts.Store.MarkStalled(ctx, p, mine.SinceMs, mine.CapMs, mine.HWM, storm.NewID(time.UnixMilli(nowMs))); err == nil && mine.Expired {
				_, _ = g.in.opts.Store.ExpireStalls(ctx, storm.NewID(time.UnixMilli(nowMs)), nowMs, p)
			}
		}
	}
}

// stallAdopt is how often a generation without stalls looks for one a
// former owner recorded late.
const stallAdopt = time.Second

// stallRefresh is how often stalled partitions are checked in Redis.
const stallRefresh = 100 * time.Millisecond

// save writes what this owner learned of its partitions, once a second.
func (g *stallGuard) save(ctx context.Context, nowMs int64) {
	if time.UnixMilli(nowMs).Sub(g.savedAt) < time.Second {
		return
	}
	g.savedAt = time.UnixMilli(nowMs)
	out := make(map[int]shard.Traffic, len(g.parts))
	for p, t := range g.parts {
		t.mu.Lock()
		if t.lastRecordMs > 0 {
			out[p] = shard.Traffic{LastRecordMs: t.lastRecordMs, HWM: t.hwm, ThresholdMs: g.threshold(p, t, nowMs), Busy: g.busy(p, t, nowMs)}
		}
		t.mu.Unlock()
	}
	_ = g.in.opts.Store.SaveTraffic(ctx, out)
}
