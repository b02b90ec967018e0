package maintenance

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/retry"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/shard"
)

const (
	partitions = 4
	interval   = 200 * time.Millisecond
	timeout    = time.Second
	// meterTimeout is the timeout of class meter, which a class window
	// matches.
	meterTimeout = 1500 * time.Millisecond
)

// group makes n devices named prefix0..prefix<n-1>.
func group(prefix, class string, n int) []*device {
	out := make([]*device, n)
	for k := range out {
		out[k] = &device{id: prefix + strconv.Itoa(k), class: class}
	}
	return out
}

// Planned silence fires nothing while its window is open; a device that
// stays silent past the window's end fires one timeout carrying the
// window's id, from the end, within its timeout + 1 s; one that beat again
// fires nothing, and one that beat again just before the end and died
// after it fires its own timeout from that heartbeat; devices no window
// matches fire as ever. The instance is restarted mid-window, and one
// window is ended early.
func TestPlannedSilenceFiresOnlyForDevicesThatDoNotComeBack(t *testing.T) {
	e, inst, events := startInstance(t)

	dead, reboot, live := group("site-a/dead-", "", 5), group("site-a/reboot-", "", 5), group("site-a/live-", "", 5)
	// late devices come back just before the window ends and die right
	// after: their own timeout from their last heartbeat, not the window's.
	late := group("site-a/late-", "", 3)
	meters, others := group("meter-", "meter", 5), group("other-", "", 5)
	solo := &device{id: "solo-1"}
	var all []*device
	for _, g := range [][]*device{dead, reboot, live, late, meters, others, {solo}} {
		all = append(all, g...)
	}
	b := beatTracked(t, e, inst, all)
	ctx := t.Context()

	t0 := time.Now()
	prefixW := start(t, inst.Store, maintenance.Request{Prefix: "site-a/", Until: t0.Add(5 * time.Second), Reason: "firmware 4.2"}, t0)
	classW := start(t, inst.Store, maintenance.Request{Class: "meter", Until: t0.Add(4500 * time.Millisecond)}, t0)
	soloW := start(t, inst.Store, maintenance.Request{Devices: []string{"solo-1", "solo-2"}, For: time.Hour}, t0)
	silent := t0.Add(500 * time.Millisecond)
	b.set(func() {
		for _, g := range [][]*device{dead, meters, others, {solo}} {
			for _, d := range g {
				d.silentFrom = silent
			}
		}
		for _, d := range reboot {
			d.silentFrom, d.silentUntil = silent, t0.Add(2800*time.Millisecond)
		}
		for _, d := range late {
			d.silentFrom, d.silentUntil, d.diesAt = silent, t0.Add(4600*time.Millisecond), t0.Add(4900*time.Millisecond)
		}
	})

	// While the window is open, a silent device it matches is held.
	policy, err := app.ReadPolicy(ctx, inst.Store, e.Cfg.Timeouts)
	if err != nil {
		t.Fatal(err)
	}
	e2etest.EventuallyNil(t, 5*time.Second, "the prefix window holding its dead devices", func() error {
		d, err := inspect.GetDevice(ctx, inst.Store, policy, dead[0].id, 0)
		if err != nil {
			return err
		}
		if d.State != "maintenance" || d.MaintenanceID != prefixW.ID {
			return fmt.Errorf("device %+v", d)
		}
		ws, err := inspect.Maintenance(ctx, inst.Store, false, time.Now())
		if err != nil || len(ws) != 3 {
			return fmt.Errorf("windows %+v: %v", ws, err)
		}
		for _, w := range ws {
			if w.ID == prefixW.ID && w.Held < int64(len(dead)) {
				return fmt.Errorf("prefix window %+v: want %d held at least", w, len(dead))
			}
		}
		return heldMetric(inst, int64(len(dead)))
	})

	// Restarted mid-window: the new instance loads the windows before it
	// fires anything.
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	inst = e2etest.Start(t, e.Cfg, app.Hooks{})
	e2etest.Eventually(t, 10*time.Second, "the restarted instance's ingest caught up", func() bool {
		return inst.Gate.Watermark() >= restarted.UnixMilli()
	})

	// The one-device window ends early: its device gets its timeout from
	// the actual end.
	time.Sleep(time.Until(t0.Add(3200 * time.Millisecond)))
	ended, released, err := maintenance.End(ctx, inst.Store, soloW.ID, time.Now(), retry.Sleep)
	if err != nil || released != 1 {
		t.Fatalf("end %s: released %d, %v", soloW.ID, released, err)
	}

	byID := func() map[string][]dispatch.Event {
		out := map[string][]dispatch.Event{}
		for id, rs := range events.ByDevice() {
			for _, r := range rs {
				if r.Ev.Type == dispatch.TypeTimeout {
					out[id] = append(out[id], r.Ev)
				}
			}
		}
		return out
	}
	want := len(dead) + len(late) + len(meters) + len(others) + 1
	e2etest.Eventually(t, 20*time.Second, "the dead devices' timeouts", func() bool { return len(byID()) >= want })
	time.Sleep(2 * time.Second) // anything more would be a duplicate or a false timeout
	got := byID()
	t.Logf("e.g. %+v", got[dead[0].id])
	if len(got) != want {
		t.Errorf("%d devices fired, want %d: %v", len(got), want, keys(got))
	}
	for _, d := range dead {
		checkReleased(t, got[d.id], prefixW.ID, prefixW.UntilMs, timeout)
	}
	for _, d := range meters {
		checkReleased(t, got[d.id], classW.ID, classW.UntilMs, meterTimeout)
	}
	checkReleased(t, got[solo.id], soloW.ID, ended.EndedAtMs, timeout)
	for _, d := range append(others, late...) {
		evs := got[d.id]
		if len(evs) != 1 || evs[0].MaintenanceID != "" || evs[0].DeadlineMs != b.lastBeat(d.id)+timeout.Milliseconds() {
			t.Errorf("%s: %+v, want one timeout at its last beat %d + 1s, without maintenance_id", d.id, evs, b.lastBeat(d.id))
		}
	}
	for _, d := range append(reboot, live...) {
		if evs := got[d.id]; len(evs) > 0 {
			t.Errorf("%s beat again (or through): fired %+v", d.id, evs)
		}
	}
}

// checkReleased checks one device's events: one timeout from end (the
// window's end) carrying window, detected within its timeout + 1 s.
func checkReleased(t *testing.T, evs []dispatch.Event, window string, endMs int64, timeout time.Duration) {
	t.Helper()
	if len(evs) != 1 {
		t.Errorf("%d timeouts %+v, want 1", len(evs), evs)
		return
	}
	ev := evs[0]
	deadline := endMs + timeout.Milliseconds()
	if ev.MaintenanceID != window || ev.LastSeenMs != endMs || ev.DeadlineMs != deadline || ev.StormID != "" {
		t.Errorf("%s: %+v, want maintenance_id %s, last_seen_ms %d, deadline_ms %d", ev.DeviceID, ev, window, endMs, deadline)
	}
	if late := ev.DetectedAtMs - deadline; late > time.Second.Milliseconds() || late < 0 {
		t.Errorf("%s: detected %d ms after its deadline, want within 1 s", ev.DeviceID, late)
	}
}

// heldMetric checks that flatline_devices_held{reason="maintenance"} is at
// least atLeast.
func heldMetric(inst *e2etest.Instance, atLeast int64) error {
	fams, err := inst.Metrics.Registry.Gather()
	if err != nil {
		return err
	}
	for _, f := range fams {
		if f.GetName() != "flatline_devices_held" {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "maintenance" && int64(m.GetGauge().GetValue()) >= atLeast {
				return nil
			}
		}
		return fmt.Errorf("flatline_devices_held: %v", f.GetMetric())
	}
	return fmt.Errorf("no flatline_devices_held")
}

func start(t *testing.T, st *shard.Store, r maintenance.Request, now time.Time) shard.Window {
	t.Helper()
	w, err := maintenance.Start(t.Context(), st, maintenance.DefaultConfig(), r, now)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func keys(m map[string][]dispatch.Event) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}
