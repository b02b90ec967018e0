package e2etest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/shard"
)

// Delivery is what a test promises about duplicates.
type Delivery int

const (
	// ExactlyOnce: every silent device gets exactly one timeout.
	ExactlyOnce Delivery = iota
	// AtLeastOnce: a crash may repeat a timeout; every repeat carries the
	// original's event_id.
	AtLeastOnce
)

// Want is what a fleet test expects of the timeouts: the timeout every
// device has, the shard count the events may name (the largest layout of
// the test), and whether a timeout may repeat.
//
// Held are the holds of the storm guard the run recorded (HeldIn): a
// starved fleet or broker can stand a busy partition still long enough to
// be a stall, and then a silent device whose deadline fell inside the hold
// may fire as a silence storm's hold re-enters it (docs/design.md), its timeout counted again from the
// hold's end (last_seen_ms is the hold's end).
type Want struct {
	Timeout  time.Duration
	Shards   int
	Delivery Delivery
	Held     []shard.Held
}

// HeldIn reads the holds recorded in store (kept an hour after their end),
// for Want.Held.
func HeldIn(t testing.TB, store *shard.Store) []shard.Held {
	t.Helper()
	st, err := store.ReadGate(context.Background())
	if err != nil {
		t.Fatalf("read the storm guard's holds: %v", err)
	}
	return st.Held
}

// reentered lists the deadlines a device last heard at lastMs may fire
// with: its own, then each one a hold in held gave it again from the
// hold's end (scanner/reenter.go's rule).
func reentered(lastMs, timeoutMs int64, held []shard.Held) []int64 {
	out := []int64{lastMs + timeoutMs}
	for again := true; again; {
		again = false
		d := out[len(out)-1]
		for _, h := range held {
			if d > h.FromMs && d-timeoutMs < h.EndMs && h.EndMs+timeoutMs > d {
				out = append(out, h.EndMs+timeoutMs)
				again = true
				break
			}
		}
	}
	return out
}

// Verdict is what a test observed about the timeouts topic.
type Verdict struct {
	Timeouts   int // timeout events read
	Silent     int // silent devices
	Fired      int // silent devices with at least one timeout
	Duplicates int // timeout events beyond the first of a device
	DupDevices int // devices with a duplicate
	Reentered  int // silent devices that fired re-entered by a hold (Want.Held)
	// Excused counts the events the fleet's own stalls make right (a
	// timeout at a deadline its next heartbeat reached Kafka only after,
	// and the recovered event that ends it), over ExcusedDevices devices.
	Excused        int
	ExcusedDevices int

	// Late holds, per silent device that fired, the time from its deadline
	// to the collector reading its first timeout.
	Late []time.Duration
	// Rounds and MaxLag describe the fleet: rounds acknowledged, and the
	// longest time from a heartbeat to the acknowledgement of the next.
	Rounds int
	MaxLag time.Duration
	// AllFired is when the last silent device was seen to fire (set by
	// Finish).
	AllFired time.Time
}

func (v Verdict) String() string {
	s := fmt.Sprintf("%d timeout events; %d of %d silent devices fired; %d duplicates over %d devices",
		v.Timeouts, v.Fired, v.Silent, v.Duplicates, v.DupDevices)
	if v.Reentered > 0 {
		s += fmt.Sprintf("; %d fired re-entered after a hold of the storm guard", v.Reentered)
	}
	if v.Excused > 0 {
		s += fmt.Sprintf("; %d events over %d devices at the fleet's own stalls", v.Excused, v.ExcusedDevices)
	}
	return s
}

// Verdict checks the contract (docs/design.md) on the events c read, once the fleet and the
// instances have stopped and c was drained: every silent device got a
// timeout (exactly one for ExactlyOnce) for its last acknowledged heartbeat,
// with every field right, and every duplicate carries the original's
// event_id; no live device and no unknown device got one; nothing came
// back, so there is no recovered event.
//
// A fleet that could not keep its own rhythm (a starved machine) makes some
// timeouts right: where Kafka acknowledged a round only at or after the
// deadline the previous round set, the devices of that round may time out
// at that deadline and recover when the late heartbeat is read (the
// fleet's stalls). Those events are counted apart and are neither required
// nor false; every other event is judged as above.
func (f *Fleet) Verdict(t testing.TB, c *Collector, w Want) Verdict {
	t.Helper()
	timeout, shards := w.Timeout, w.Shards
	f.mu.Lock()
	err := f.err
	v := Verdict{Rounds: f.rounds, MaxLag: f.maxLag}
	f.mu.Unlock()
	if err != nil {
		t.Fatalf("fleet: produce heartbeats: %v", err)
	}
	last := f.LastBeats()
	got := c.ByDevice()
	stalls := f.stalls(timeout)
	var liveFired []string
	for i, id := range f.IDs {
		v.Timeouts += len(got[id])
		var evs []Received
		for _, r := range got[id] {
			if f.atStall(i, r.Ev, stalls, timeout) {
				v.Excused++
				continue
			}
			evs = append(evs, r)
		}
		if len(evs) < len(got[id]) {
			v.ExcusedDevices++
		}
		if f.silentAt[i].IsZero() {
			if len(evs) > 0 {
				liveFired = append(liveFired, fmt.Sprintf("%s (%d timeouts, first %+v)", id, len(evs), evs[0].Ev))
			}
			continue
		}
		v.Silent++
		lastMs := last[id]
		if len(evs) == 0 {
			t.Errorf("silent device %s (last heartbeat %d) got no timeout", id, lastMs)
			continue
		}
		v.Fired++
		first := evs[0].Ev
		deadlines := reentered(lastMs, timeout.Milliseconds(), w.Held)
		if first.DeadlineMs != deadlines[0] && slices.Contains(deadlines, first.DeadlineMs) {
			v.Reentered++
		}
		for k, r := range evs {
			ev := r.Ev
			if ev.Type != dispatch.TypeTimeout {
				t.Errorf("%s: unexpected %s event %+v", id, ev.Type, ev)
				continue
			}
			if r.Key != id {
				t.Errorf("%s: event under Kafka key %q", id, r.Key)
			}
			if !slices.Contains(deadlines, ev.DeadlineMs) || ev.LastSeenMs != ev.DeadlineMs-timeout.Milliseconds() || ev.TimeoutMs != timeout.Milliseconds() {
				t.Errorf("%s: last_seen %d deadline %d timeout %d, want its last heartbeat %d + %v (or a hold's end + %v: holds %+v)",
					id, ev.LastSeenMs, ev.DeadlineMs, ev.TimeoutMs, lastMs, timeout, timeout, w.Held)
			}
			if ev.EventID != id+"/"+strconv.FormatInt(ev.DeadlineMs, 10) {
				t.Errorf("%s: event_id %q", id, ev.EventID)
			}
			if ev.DetectedAtMs < ev.DeadlineMs {
				t.Errorf("%s: detected at %d, before its deadline %d", id, ev.DetectedAtMs, ev.DeadlineMs)
			}
			if ev.Shard < 0 || ev.Shard >= shards {
				t.Errorf("%s: shard %d of %d", id, ev.Shard, shards)
			}
			if k > 0 {
				v.Duplicates++
				if ev.EventID != first.EventID {
					t.Errorf("%s: duplicate timeout with event_id %q, the original has %q", id, ev.EventID, first.EventID)
				}
			}
		}
		v.Late = append(v.Late, evs[0].At.Sub(time.UnixMilli(first.DeadlineMs)))
		if len(evs) > 1 {
			v.DupDevices++
			if w.Delivery == ExactlyOnce {
				var desc []string
				for _, e := range evs {
					desc = append(desc, fmt.Sprintf("{deadline %d shard %d detected %d}", e.Ev.DeadlineMs, e.Ev.Shard, e.Ev.DetectedAtMs))
				}
				t.Errorf("silent device %s got %d timeouts, want exactly 1: %v", id, len(evs), desc)
			}
		}
	}
	known := make(map[string]bool, len(f.IDs))
	for _, id := range f.IDs {
		known[id] = true
	}
	for id, evs := range got {
		if !known[id] {
			t.Errorf("event for unknown device %q: %+v", id, evs[0].Ev)
		}
	}
	if v.Excused > 0 {
		t.Logf("the fleet itself stalled (%d rounds acknowledged at or after the deadline the round before set, the longest %v from a heartbeat to the next one's acknowledgement): %d events of %d devices at those deadlines are right, not false",
			len(stalls), v.MaxLag.Round(time.Millisecond), v.Excused, v.ExcusedDevices)
	}
	if len(liveFired) > 0 {
		slices.Sort(liveFired)
		t.Errorf("%d live devices got a timeout, e.g. %s", len(liveFired), strings.Join(liveFired[:min(5, len(liveFired))], "; "))
	}
	return v
}

// Finish ends a fleet test whose instances run in process: it waits up to
// wait for every silent device's timeout (failing at once if an instance
// stopped on its own or the fleet could not produce), keeps the fleet
// beating 1.5 s more so that late duplicates and false timeouts show,
// stops the instances (before the fleet, or every device would time out),
// then the fleet, reads c to the topic's end and returns the Verdict.
func (f *Fleet) Finish(t testing.TB, c *Collector, wait time.Duration, w Want, insts ...*Instance) Verdict {
	t.Helper()
	EventuallyNil(t, wait, "a timeout for every silent device", func() error {
		for _, in := range insts {
			if in.Exited() {
				t.Fatalf("flatline %s stopped on its own: %v", in.ID(), in.Err())
			}
		}
		if err := f.Err(); err != nil {
			t.Fatalf("fleet: produce heartbeats: %v (%s)", err, f.progress())
		}
		return f.unfired(c, insts)
	})
	allFired := time.Now()
	time.Sleep(1500 * time.Millisecond) // the watch for duplicates and false timeouts
	if len(insts) > 0 {
		w.Held = HeldIn(t, insts[0].Store)
	}
	for _, in := range insts {
		if err := in.Stop(); err != nil {
			t.Errorf("flatline %s stopped with %v", in.ID(), err)
		}
	}
	f.Stop()
	c.Drain(t)
	v := f.Verdict(t, c, w)
	v.AllFired = allFired
	return v
}

// atStall says whether ev, an event of device i, is one of the fleet's own
// stalls makes right: a timeout at a stall's deadline, or the recovered
// event ending one, for a device that still beat in the late round.
func (f *Fleet) atStall(i int, ev dispatch.Event, stalls []stall, timeout time.Duration) bool {
	for _, s := range stalls {
		if at := f.silentAt[i]; !at.IsZero() && !s.next.Before(at) {
			continue // silent by the late round: its last heartbeat was before
		}
		switch ev.Type {
		case dispatch.TypeTimeout:
			if ev.DeadlineMs == s.deadlineMs && ev.LastSeenMs == s.deadlineMs-timeout.Milliseconds() {
				return true
			}
		case dispatch.TypeRecovered:
			if ev.DownSinceMs == s.deadlineMs {
				return true
			}
		}
	}
	return false
}

// unfired is nil once every silent device got a timeout in c, and says
// otherwise how many did not and where a few of them stand (Unfired).
func (f *Fleet) unfired(c *Collector, insts []*Instance) error {
	var in *Instance
	if len(insts) > 0 {
		in = insts[0]
	}
	if err := Unfired(c, f.SilentIDs(), f.LastBeats(), in); err != nil {
		return fmt.Errorf("%w; %s", err, f.progress())
	}
	return nil
}

// Unfired is nil once every device of ids got a timeout in c for its last
// heartbeat in last or later (one at an earlier deadline is a stall of
// the fleet's, not its silence), and says otherwise how many did not; its message (made only when printed) adds
// where the timeouts topic stands against what c read, and for three of
// the devices their last heartbeat (from last) and, with in, their
// deadline in Redis and in's gate watermark: what a test that waits for
// timeouts in vain has to say.
func Unfired(c *Collector, ids []string, last map[string]int64, in *Instance) error {
	got := c.ByDevice()
	var missing []string
	for _, id := range ids {
		lastMs, known := last[id]
		if !slices.ContainsFunc(got[id], func(r Received) bool {
			return r.Ev.Type == dispatch.TypeTimeout && (!known || r.Ev.LastSeenMs >= lastMs)
		}) {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &unfiredError{c: c, of: len(ids), missing: missing, last: last, in: in, at: time.Now()}
}

type unfiredError struct {
	c       *Collector
	of      int
	missing []string
	last    map[string]int64
	in      *Instance
	at      time.Time
}

func (e *unfiredError) Error() string {
	desc := fmt.Sprintf("%d of %d devices without a timeout at %d (%s)", len(e.missing), e.of, e.at.UnixMilli(), e.c.Behind())
	if e.in == nil {
		return desc
	}
	desc += fmt.Sprintf(", gate watermark %d", e.in.Gate.Watermark())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, _, err := e.in.Store.Layout(ctx)
	for _, id := range e.missing[:min(3, len(e.missing))] {
		desc += fmt.Sprintf("; %s last heartbeat %d", id, e.last[id])
		if err != nil {
			continue
		}
		i := l.ShardOf(shard.Hash(id))
		score, ok, err := e.in.Store.Score(ctx, i, id)
		deadline, _ := shard.DecodeScore(score)
		desc += fmt.Sprintf(", in shard %d: tracked %v, deadline %d (%v)", i, ok, deadline, err)
	}
	return desc
}

// Spread says how durations spread: "p50 … p99 … max …", rounded to the
// millisecond. ds is left as it is.
func Spread(ds []time.Duration) string {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	at := func(p float64) time.Duration { return Percentile(sorted, p).Round(time.Millisecond) }
	return fmt.Sprintf("p50 %v p99 %v max %v", at(.5), at(.99), at(1))
}

// Percentile of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}
