package storms

import (
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// The fleet of these tests: devices beating every 200 ms with 1 s
// timeouts, over 8 partitions, 120 devices each (storm.min_devices is 100):
// 4,800 heartbeats a second, which two cores under -race keep up with.
const (
	perPartition = 120
	devices      = partitions * perPartition
	partitions   = 8
	interval     = 200 * time.Millisecond
	timeout      = time.Second
	outage       = 8 * time.Second
	// stallAfter is storm.stall_after's default: a deadline within it of
	// the outage's start may fire (docs/design.md, "Silence storms"), so the tests count from it.
	stallAfter = 500 * time.Millisecond
)

// stormEnv starts Redis, Kafka, a collector of the timeouts topic and an
// instance configured by configure.
func stormEnv(t *testing.T, configure func(*configs.Config)) (*e2etest.Env, *e2etest.Instance, *e2etest.Collector) {
	t.Helper()
	e := e2etest.NewEnv(t, partitions)
	e.Cfg.Timeouts.Default = timeout
	e.Cfg.Shards.InitialCount = 16
	if configure != nil {
		configure(&e.Cfg)
	}
	inst := e2etest.Start(t, e.Cfg, app.Hooks{})
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, partitions)
	return e, inst, events
}

// warm waits until every device is tracked and a few rounds went by, so
// that every partition's traffic is learned.
func warm(t *testing.T, inst *e2etest.Instance, n int64) {
	t.Helper()
	ctx := t.Context()
	e2etest.Eventually(t, 30*time.Second, "every device tracked", func() bool {
		tracked, err := inst.Store.Tracked(ctx, 16)
		return err == nil && tracked == n
	})
	time.Sleep(5 * interval) // a few rounds of traffic: the usual gaps between records
}

// byType splits the events read so far by type, and the timeouts and
// recoveries by device.
//
// Only the events of silences from since on count: the tests pass the
// outage's start + stall_after, as a deadline before that may fire by
// contract (the guard cannot yet tell the outage from deaths), and one
// before the outage is a device that was already silent.
func byType(c *e2etest.Collector, since time.Time) (timeouts, recovered map[string][]dispatch.Event, storms []dispatch.Event) {
	timeouts, recovered = map[string][]dispatch.Event{}, map[string][]dispatch.Event{}
	from := since.UnixMilli()
	for id, rs := range c.ByDevice() {
		for _, r := range rs {
			if (r.Ev.Type == dispatch.TypeTimeout && r.Ev.DeadlineMs < from) || (r.Ev.Type == dispatch.TypeRecovered && r.Ev.DownSinceMs < from) {
				continue
			}
			switch r.Ev.Type {
			case dispatch.TypeTimeout:
				timeouts[id] = append(timeouts[id], r.Ev)
			case dispatch.TypeRecovered:
				recovered[id] = append(recovered[id], r.Ev)
			}
		}
	}
	for _, r := range c.Storms() {
		storms = append(storms, r.Ev)
	}
	return timeouts, recovered, storms
}

// TestPipeOutageFiresOnlyTheDevicesThatDied: every producer stops for 8 s
// (the devices keep beating, their heartbeats go nowhere), then the pipe
// returns; some devices come back 700 ms after the others, and some died
// during the outage. Those that come back never fire and never recover;
// those that died fire once each, no later than the return + their timeout
// + 1 s, carrying a storm_id, and the storm is announced.
func TestPipeOutageFiresOnlyTheDevicesThatDied(t *testing.T) {
	e, inst, events := stormEnv(t, nil)
	ids := e2etest.IDs("po-", devices)
	p := startPipe(t, e.Kafka.Brokers(), ids, interval, nil)
	warm(t, inst, devices)

	var dead, late []int
	for i := range ids {
		switch {
		case i%11 == 0:
			dead = append(dead, i) // 88 devices
		case i%13 == 0:
			late = append(late, i)
		}
	}
	broke := time.Now()
	p.breakFor(outage, dead, late, 700*time.Millisecond, nil)
	e2etest.Eventually(t, 10*time.Second, "the pipe to return", func() bool { return !p.returned().IsZero() })
	back := p.returned()
	e2etest.Eventually(t, 20*time.Second, "every dead device to fire", func() bool {
		to, _, _ := byType(events, broke)
		n := 0
		for _, i := range dead {
			if len(to[ids[i]]) > 0 {
				n++
			}
		}
		return n == len(dead)
	})
	// Past the latest moment a device that came back could still fire.
	time.Sleep(timeout + 700*time.Millisecond + time.Second)

	to, _, storms := byType(events, broke)
	counted, rec, _ := byType(events, broke.Add(stallAfter))
	isDead := map[string]bool{}
	for _, i := range dead {
		isDead[ids[i]] = true
	}
	var falseTimeouts, falseRecoveries []string
	for id := range counted {
		if !isDead[id] {
			falseTimeouts = append(falseTimeouts, id)
		}
	}
	for id := range rec {
		falseRecoveries = append(falseRecoveries, id)
	}
	if n := len(to) - len(counted); n > 0 {
		t.Logf("%d devices fired with a deadline within stall_after of the outage's start (allowed)", n)
	}
	slices.Sort(falseTimeouts)
	if len(falseTimeouts) > 0 || len(falseRecoveries) > 0 {
		t.Errorf("%d false timeouts (%v…), %d recovered events, for devices that came back (the fleet's own longest gap: %v)", len(falseTimeouts), first(falseTimeouts), len(falseRecoveries), p.lag(t))
	}
	stormID := ""
	var lateness []time.Duration
	for _, i := range dead {
		evs := to[ids[i]]
		if len(evs) != 1 {
			t.Errorf("%s: %d timeouts, want 1", ids[i], len(evs))
			continue
		}
		ev := evs[0]
		if ev.StormID == "" {
			t.Errorf("%s: timeout without a storm_id: %+v", ids[i], ev)
		} else if stormID == "" {
			stormID = ev.StormID
		}
		bound := back.Add(timeout + time.Second)
		if at := time.UnixMilli(ev.DetectedAtMs); at.After(bound) {
			t.Errorf("%s: detected %v after the return, past return + timeout + 1 s", ids[i], at.Sub(back))
		}
		lateness = append(lateness, time.UnixMilli(ev.DetectedAtMs).Sub(back))
	}
	t.Logf("dead devices detected after the return: %s", e2etest.Spread(lateness))
	started := false
	for _, ev := range storms {
		if ev.Type == "storm_started" && ev.StormID == stormID {
			started = true
		}
	}
	if !started {
		t.Errorf("no storm_started event for storm %q (storm events: %+v)", stormID, storms)
	}
}

func first(s []string) []string { return s[:min(len(s), 5)] }

// holdSince waits for a hold to begin and returns when its first stall was
// detected.
func holdSince(t *testing.T, inst *e2etest.Instance) time.Time {
	t.Helper()
	var since int64
	e2etest.Eventually(t, 10*time.Second, "a hold to begin", func() bool {
		gs, err := inst.Store.ReadGate(t.Context())
		if err == nil && gs.Hold != nil {
			since = gs.Hold.SinceMs
		}
		return since > 0
	})
	return time.UnixMilli(since)
}

// stalled returns the stalled partitions Redis holds, sorted.
func stalled(t *testing.T, inst *e2etest.Instance) []int {
	t.Helper()
	gs, err := inst.Store.ReadGate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ps []int
	for p := range gs.Stalls {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// TestMaxHoldFiresTheHeldDeadlinesOnce: with storm.max_hold 3s the same
// outage fires every held deadline once, none before the stall's
// detection + 3 s, each with a storm_id (here every device is silent to
// flatline: the pipe is down for all of them).
func TestMaxHoldFiresTheHeldDeadlinesOnce(t *testing.T) {
	const maxHold = 3 * time.Second
	e, inst, events := stormEnv(t, func(c *configs.Config) { c.Storm.MaxHold = maxHold })
	ids := e2etest.IDs("mh-", devices)
	p := startPipe(t, e.Kafka.Brokers(), ids, interval, nil)
	warm(t, inst, devices)
	broke := time.Now()
	go p.breakFor(outage, nil, nil, 0, nil)
	detected := holdSince(t, inst)
	e2etest.Eventually(t, 20*time.Second, "every device to fire", func() bool {
		to, _, _ := byType(events, broke)
		return len(to) == devices
	})
	all, _, _ := byType(events, broke)
	to, _, _ := byType(events, broke.Add(stallAfter))
	t.Logf("%d of %d devices fired with a deadline within stall_after of the outage's start (allowed), %d were held", len(all)-len(to), devices, len(to))
	var early, noStorm, twice int
	for id, evs := range to {
		if len(evs) != 1 {
			twice++
			t.Logf("%s: %d timeouts", id, len(evs))
		}
		ev := evs[0]
		if time.UnixMilli(ev.DetectedAtMs).Before(detected.Add(maxHold)) {
			early++
		}
		if ev.StormID == "" {
			noStorm++
		}
	}
	if early > 0 || noStorm > 0 || twice > 0 {
		t.Errorf("of %d held devices: %d fired before the stall's detection + max_hold, %d without a storm_id, %d more than once (the fleet's own longest gap: %v)", len(to), early, noStorm, twice, p.lag(t))
	}
}

// TestStalledPartitionsAmongFlowingOnes: the producers of 2 of 8
// partitions stop for the outage; the others go on. No device behind the
// stalled partitions fires.
func TestStalledPartitionsAmongFlowingOnes(t *testing.T) {
	e, inst, events := stormEnv(t, nil)
	ids := e2etest.IDs("sp-", devices)
	p := startPipe(t, e.Kafka.Brokers(), ids, interval, func(i int) int { return i % partitions })
	warm(t, inst, devices)
	broke := time.Now()
	go p.breakFor(outage, nil, nil, 0, map[int]bool{2: true, 5: true})
	holdSince(t, inst)
	var got []int
	e2etest.Eventually(t, 5*time.Second, "partitions 2 and 5 stalled", func() bool {
		got = stalled(t, inst)
		return slices.Equal(got, []int{2, 5})
	})
	e2etest.Eventually(t, 15*time.Second, "the pipe to return", func() bool { return !p.returned().IsZero() })
	time.Sleep(timeout + 2*time.Second) // past when any held device could fire
	to, rec, _ := byType(events, broke.Add(stallAfter))
	if len(to) > 0 || len(rec) > 0 {
		var some []string
		for id := range to {
			some = append(some, id)
		}
		t.Errorf("%d false timeouts (%v…), %d recovered events (the fleet's own longest gap: %v)", len(to), first(some), len(rec), p.lag(t))
	}
}

// TestQuietPartitionNeverHolds: a partition whose traffic comes from fewer
// than storm.min_devices devices, all of which die, fires them on time and
// holds nothing.
func TestQuietPartitionNeverHolds(t *testing.T) {
	e, inst, events := stormEnv(t, nil)
	// 8 partitions of perPartition devices, but partition 7 carries 40 only.
	n := 7*perPartition + 40
	ids := e2etest.IDs("qp-", n)
	p := startPipe(t, e.Kafka.Brokers(), ids, interval, func(i int) int { return min(i/perPartition, 7) })
	warm(t, inst, int64(n))
	var dead []int
	for i := 7 * perPartition; i < n; i++ {
		dead = append(dead, i)
	}
	died := time.Now()
	p.mu.Lock()
	for _, i := range dead {
		p.deadAt[i] = died
	}
	p.mu.Unlock()
	e2etest.Eventually(t, 10*time.Second, "the quiet partition's devices to fire", func() bool {
		to, _, _ := byType(events, died)
		return len(to) == len(dead)
	})
	to, _, _ := byType(events, died)
	var lateness []time.Duration
	for _, i := range dead {
		for _, ev := range to[ids[i]] {
			lateness = append(lateness, time.Duration(ev.DetectedAtMs-ev.DeadlineMs)*time.Millisecond)
			if ev.StormID != "" {
				t.Errorf("%s: storm_id %q on a timeout that no storm held", ids[i], ev.StormID)
			}
		}
	}
	t.Logf("lateness of the quiet partition's devices: %s", e2etest.Spread(lateness))
	st, err := inst.Store.ReadGate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stalls) > 0 || st.Hold != nil {
		t.Errorf("a quiet partition stalled: stalls %+v, hold %+v", st.Stalls, st.Hold)
	}
}

// TestRestartOfTheStalledPartitionsOwnerKeepsTheHold: two instances; the
// one that owns the stalled partitions restarts in the middle of the
// outage. The hold is in Redis, so the partitions' new owners keep it:
// still no false timeout.
func TestRestartOfTheStalledPartitionsOwnerKeepsTheHold(t *testing.T) {
	e, a, events := stormEnv(t, nil)
	b := e2etest.Start(t, e.Cfg, app.Hooks{})
	ids := e2etest.IDs("rs-", devices)
	p := startPipe(t, e.Kafka.Brokers(), ids, interval, func(i int) int { return i % partitions })
	warm(t, a, devices)
	// Both own partitions once the group settled; the outage stops the
	// partitions a owns.
	var owned map[int]bool
	e2etest.Eventually(t, 30*time.Second, "a to own some partitions", func() bool {
		owned = a.Ingest.Owned()
		return len(owned) > 0 && len(owned) < partitions
	})
	broke := time.Now()
	go p.breakFor(outage, nil, nil, 0, owned)
	holdSince(t, a)
	time.Sleep(outage / 2) // mid-outage: what the test is about
	if err := a.Stop(); err != nil {
		t.Fatalf("stop a: %v", err)
	}
	want := stalled(t, b)
	a2 := e2etest.Start(t, e.Cfg, app.Hooks{})
	e2etest.Eventually(t, 30*time.Second, "a's successor to own partitions", func() bool { return len(a2.Ingest.Owned()) > 0 })
	if got := stalled(t, b); p.returned().IsZero() && !slices.Equal(got, want) {
		t.Errorf("stalled partitions %v after the restart, %v before", got, want)
	}
	e2etest.Eventually(t, 15*time.Second, "the pipe to return", func() bool { return !p.returned().IsZero() })
	time.Sleep(timeout + 2*time.Second)
	to, rec, _ := byType(events, broke.Add(stallAfter))
	if len(to) > 0 || len(rec) > 0 {
		var some []string
		for id := range to {
			some = append(some, id)
		}
		t.Errorf("%d false timeouts (%v…), %d recovered events, with b %s running (the fleet's own longest gap: %v)", len(to), first(some), len(rec), b.ID(), p.lag(t))
	}
}
