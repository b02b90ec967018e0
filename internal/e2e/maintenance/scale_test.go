package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/rebalance"
)

// Doubling the shards while a window holds devices moves them to their new
// shards: they still fire once each after the window's end, from the end,
// with its id — whether the window ends by its time or is ended early.
func TestHeldDevicesFollowADoubling(t *testing.T) {
	e, inst, events := startInstance(t)
	timed, early := group("mig-a-", "", 16), group("mig-b-", "", 16)
	dead := append(timed, early...)
	b := beatTracked(t, e, inst, dead)
	ctx := t.Context()
	t0 := time.Now()
	w := start(t, inst.Store, maintenance.Request{Prefix: "mig-a-", Until: t0.Add(8 * time.Second)}, t0)
	wb := start(t, inst.Store, maintenance.Request{Prefix: "mig-b-", For: time.Hour}, t0)
	b.set(func() {
		for _, d := range dead {
			d.silentFrom = t0.Add(300 * time.Millisecond)
		}
	})
	e2etest.EventuallyNil(t, 10*time.Second, "every device held", func() error {
		held, err := inst.Store.HeldCounts(ctx, 4)
		if err != nil || held[w.ID] != int64(len(timed)) || held[wb.ID] != int64(len(early)) {
			return fmt.Errorf("held %v: %v", held, err)
		}
		return nil
	})
	if _, err := rebalance.Scale(ctx, inst.Store, 8, time.Now()); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 30*time.Second, "the doubling to finalize", func() bool {
		l, ok, err := inst.Store.Layout(ctx)
		return err == nil && ok && l.Count == 8 && l.Previous == 0
	})
	t.Logf("finalized %v before the window's end", time.Until(time.UnixMilli(w.UntilMs)).Round(time.Millisecond))
	// Pruning keeps the records the moved devices left behind, and the
	// moved devices are still counted as held, and shown so.
	for i := 0; i < 8; i++ {
		if _, err := inst.Store.PruneHeld(ctx, i, 8); err != nil {
			t.Fatal(err)
		}
	}
	held, err := inst.Store.HeldCounts(ctx, 8)
	if err != nil || held[w.ID] != int64(len(timed)) || held[wb.ID] != int64(len(early)) {
		t.Errorf("after the doubling: held %v, %v; want %d and %d", held, err, len(timed), len(early))
	}
	policy, err := app.ReadPolicy(ctx, inst.Store, e.Cfg.Timeouts)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		got, err := inspect.GetDevice(ctx, inst.Store, policy, d.id, 0)
		if err != nil || got.State != "maintenance" {
			t.Errorf("after the doubling: %s %+v, %v; want state maintenance", d.id, got, err)
		}
	}
	ended, released, err := maintenance.End(ctx, inst.Store, wb.ID, time.Now(), nil)
	if err != nil || released != len(early) {
		t.Fatalf("end %s: released %d of %d, %v", wb.ID, released, len(early), err)
	}
	e2etest.Eventually(t, 20*time.Second, "every held device's timeout", func() bool {
		return events.CountDevices(ids(dead)) == len(dead)
	})
	time.Sleep(time.Second) // a second event would be a duplicate
	byDevice := events.ByDevice()
	for _, d := range dead {
		var evs []dispatch.Event
		for _, r := range byDevice[d.id] {
			evs = append(evs, r.Ev)
		}
		if d.id[4] == 'a' {
			checkReleased(t, evs, w.ID, w.UntilMs, timeout)
		} else {
			checkReleased(t, evs, wb.ID, ended.EndedAtMs, timeout)
		}
	}
}

func ids(ds []*device) []string {
	out := make([]string, len(ds))
	for k, d := range ds {
		out[k] = d.id
	}
	return out
}
