package gateways

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// events waits until the collector read n events of devices (storm events
// aside) and then a little longer for any extra, and returns them per
// device.
func events(t *testing.T, c *e2etest.Collector, n int) map[string][]e2etest.Received {
	t.Helper()
	e2etest.Eventually(t, 60*time.Second, "the events", func() bool { return count(c) >= n })
	// Anything more would come within the slowest path's second.
	time.Sleep(2 * time.Second)
	got := c.ByDevice()
	if m := count(c); m != n {
		t.Errorf("%d events, want %d", m, n)
	}
	return got
}

func count(c *e2etest.Collector) int {
	n := 0
	for _, rs := range c.ByDevice() {
		n += len(rs)
	}
	return n
}

// Three gateways die with their hundred children each: three timeouts,
// each counting its hundred held children, and three hundred unreachable
// events, each with the event id its timeout would have had, within a
// second of its gateway's timeout; no child times out.
func TestDeadGatewaysAreOneAlarmEach(t *testing.T) {
	t.Parallel()
	f, c := startFamily(t, 3, 100)
	f.silence(true, f.all()...)
	got := events(t, c, 303)
	for _, gw := range f.gateways {
		es := got[gw]
		if len(es) != 1 || es[0].Ev.Type != dispatch.TypeTimeout || es[0].Ev.ChildrenHeld == nil || *es[0].Ev.ChildrenHeld != 100 {
			t.Fatalf("%s: %+v, want one timeout with children_held 100", gw, es)
		}
		gwAt := es[0].Ev.DetectedAtMs
		for _, id := range f.children[gw] {
			es := got[id]
			if len(es) != 1 {
				t.Fatalf("%s: %d events, want 1 unreachable", id, len(es))
			}
			e := es[0].Ev
			if e.Type != dispatch.TypeUnreachable || e.Parent != gw || e.DeadlineMs != e.LastSeenMs+childTimeout.Milliseconds() ||
				e.EventID != dispatch.TimeoutEventID(id, e.DeadlineMs) {
				t.Errorf("%s: %+v, want unreachable under %s at its own deadline", id, e, gw)
			}
			if e.DetectedAtMs > max(gwAt, e.DeadlineMs)+1000 {
				t.Errorf("%s detected at %d: more than 1s after its gateway's timeout (%d)", id, e.DetectedAtMs, gwAt)
			}
		}
	}
	// Seen as the operator sees them.
	if n := testutil.ToFloat64(f.inst.App.Metrics.UnreachablePublished); n != 300 {
		t.Errorf("flatline_unreachable_total %v, want 300", n)
	}
	m := f.metrics(t)
	// The children's events measure their gateways' silence, not
	// flatline's lateness: the three gateways' timeouts alone count.
	if n, ok := m.Value("flatline_detection_lateness_seconds"); !ok || n != 3 {
		t.Errorf("detection lateness observed %v times (present %v), want 3", n, ok)
	}
	for state, want := range map[string]float64{"timed_out": 3, "unreachable": 300} {
		if got, ok := m.Value("flatline_devices_down", "class", "", "state", state); !ok || got != want {
			t.Errorf("flatline_devices_down{state=%q} = %v (present %v), want %v", state, got, ok, want)
		}
	}
	if d := f.device(t, "g-1/c-7"); d.State != inspect.StateUnreachable || d.Parent != "g-1" || d.Tracked {
		t.Errorf("device get g-1/c-7: %+v, want unreachable under g-1", d)
	}
	if d := f.device(t, "g-1"); d.State != inspect.StateTimedOut || d.Parent != "" {
		t.Errorf("device get g-1: %+v, want timed_out", d)
	}
	down := f.down(t, "g-2")
	if len(down) != 100 {
		t.Fatalf("devices down --parent g-2: %d, want its 100 children", len(down))
	}
	for _, d := range down {
		if d.State != inspect.StateUnreachable || d.Parent != "g-2" {
			t.Errorf("devices down --parent g-2: %+v, want unreachable under g-2", d)
		}
	}
}

// A child dies alone under a live gateway: one timeout, naming its
// gateway, at its own deadline (not held: its gateway was heard within
// half its timeout); the gateway and its other children say nothing.
func TestChildDyingAloneTimesOut(t *testing.T) {
	t.Parallel()
	f, c := startFamily(t, 1, 10)
	lone := f.children["g-0"][3]
	f.silence(true, lone)
	got := events(t, c, 1)
	es := got[lone]
	if len(es) != 1 {
		t.Fatalf("events %v, want one timeout of %s", got, lone)
	}
	if e := es[0].Ev; e.Type != dispatch.TypeTimeout || e.Parent != "g-0" || e.DeadlineMs != e.LastSeenMs+childTimeout.Milliseconds() {
		t.Errorf("%+v, want a timeout under g-0 at its own deadline", e)
	}
}

// A gateway silent longer than its children's timeout but shorter than
// its own, its children back after it: no event at all.
func TestGatewayBackInTimeLeavesNoEvent(t *testing.T) {
	t.Parallel()
	f, c := startFamily(t, 1, 50)
	f.silence(true, f.all()...)
	silent := time.Now()
	// Its children are held: they wait for it.
	e2etest.Eventually(t, gatewayTimeout, "a child held", func() bool {
		d := f.device(t, "g-0/c-5")
		return d.State == inspect.StateHeld && d.Parent == "g-0"
	})
	if n, ok := f.metrics(t).Value("flatline_devices_held", "reason", "gateway"); !ok || n == 0 {
		t.Errorf("flatline_devices_held{reason=gateway} = %v (present %v) during the hold", n, ok)
	}
	time.Sleep(time.Until(silent.Add(gatewayTimeout - time.Second)))
	f.silence(false, f.gateways...)
	time.Sleep(childTimeout / 2)
	f.silence(false, f.all()...)
	// Past every deadline the silence could have led to: the children's
	// own timeouts from their gateway's return, and a second more.
	time.Sleep(childTimeout + 2*time.Second)
	if n := count(c); n != 0 {
		t.Errorf("%d events, want none: %v", n, c.ByDevice())
	}
}

// A gateway back after its timeout, 20% of its children lost with it: the
// gateway and the children that come back recover; each lost child, known
// dead once its gateway is back, times out once, at its own timeout from
// its gateway's return.
func TestGatewayBackAfterItsTimeoutWithChildrenLost(t *testing.T) {
	t.Parallel()
	f, c := startFamily(t, 1, 50)
	kids := f.children["g-0"]
	f.silence(true, f.all()...)
	got := events(t, c, 51)
	if e := got["g-0"]; len(e) != 1 || e[0].Ev.Type != dispatch.TypeTimeout {
		t.Fatalf("g-0: %+v, want its timeout", e)
	}
	f.silence(false, "g-0")
	time.Sleep(beatEvery)
	f.silence(false, kids[10:]...)
	lost := kids[:10]
	got = events(t, c, 51+1+40+10)
	back := got["g-0"][1].Ev
	if back.Type != dispatch.TypeRecovered || back.DownSinceMs != got["g-0"][0].Ev.DeadlineMs {
		t.Fatalf("g-0 after its timeout: %+v, want its recovery", back)
	}
	for _, id := range kids[10:] {
		es := got[id]
		if len(es) != 2 || es[0].Ev.Type != dispatch.TypeUnreachable || es[1].Ev.Type != dispatch.TypeRecovered ||
			es[1].Ev.DownSinceMs != es[0].Ev.DeadlineMs {
			t.Errorf("%s: %+v, want unreachable then recovered", id, es)
		}
	}
	for _, id := range lost {
		es := got[id]
		if len(es) != 2 || es[0].Ev.Type != dispatch.TypeUnreachable {
			t.Errorf("%s: %+v, want unreachable then a timeout", id, es)
			continue
		}
		e := es[1].Ev
		if e.Type != dispatch.TypeTimeout || e.Parent != "g-0" || e.LastSeenMs != back.SeenAtMs ||
			e.DeadlineMs != back.SeenAtMs+childTimeout.Milliseconds() {
			t.Errorf("%s: %+v, want a timeout under g-0 from its return (%d)", id, e, back.SeenAtMs)
		}
	}
}

// A gateway silent for less than its own timeout comes back, and so do its
// children but one: that one, known dead once its gateway is back, times
// out once, naming its gateway, at its own timeout from the gateway's
// first heartbeat after the silence.
func TestChildLostDuringAShortGatewaySilence(t *testing.T) {
	t.Parallel()
	f, c := startFamily(t, 1, 10)
	kids := f.children["g-0"]
	f.silence(true, f.all()...)
	silent := time.Now()
	e2etest.Eventually(t, gatewayTimeout, "the children held", func() bool {
		return f.device(t, kids[0]).State == inspect.StateHeld
	})
	time.Sleep(time.Until(silent.Add(gatewayTimeout - time.Second)))
	f.silence(false, "g-0")
	time.Sleep(beatEvery)
	f.silence(false, kids[1:]...)
	got := events(t, c, 1)
	es := got[kids[0]]
	back := f.backAt("g-0")
	if len(es) != 1 {
		t.Fatalf("events %v, want one timeout of %s", got, kids[0])
	}
	if e := es[0].Ev; e.Type != dispatch.TypeTimeout || e.Parent != "g-0" || e.LastSeenMs != back || e.DeadlineMs != back+childTimeout.Milliseconds() {
		t.Errorf("%+v, want a timeout under g-0 from its return at %d", e, back)
	}
}
