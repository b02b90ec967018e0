package maintenance

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/shard"
)

// With 10,000 windows open, the 10,001st is refused with one line naming
// the limit, as are 1,001 devices and a window past maintenance.max_duration;
// and a running instance still holds the device the last window matches,
// while a device no window matches fires on time.
func TestTenThousandOpenWindowsHoldAndTheLimitsAreRefused(t *testing.T) {
	e, inst, events := startInstance(t)
	ctx := t.Context()

	now := time.Now()
	for k := 0; k < maintenance.MaxOpen-1; k++ {
		w := shard.Window{ID: "w" + strconv.Itoa(k), Match: shard.WindowMatch{Devices: []string{"nobody-" + strconv.Itoa(k)}},
			FromMs: now.UnixMilli(), UntilMs: now.Add(time.Hour).UnixMilli()}
		if _, err := inst.Store.StartWindow(ctx, w, maintenance.MaxOpen, now.UnixMilli(), 0); err != nil {
			t.Fatal(err)
		}
	}
	last := start(t, inst.Store, maintenance.Request{Prefix: "kept-", For: time.Hour}, time.Now())

	ids := make([]string, 1001)
	for k := range ids {
		ids[k] = "d-" + strconv.Itoa(k)
	}
	for _, c := range []struct {
		r    maintenance.Request
		want string
	}{
		{maintenance.Request{Prefix: "x", For: time.Hour}, "at most 10,000 maintenance windows are open at once"},
		{maintenance.Request{Devices: ids, For: time.Hour}, "--device takes at most 1,000 ids"},
		{maintenance.Request{Prefix: "x", For: 200 * time.Hour}, "maintenance.max_duration (168h0m0s)"},
	} {
		_, err := maintenance.Start(ctx, inst.Store, e.Cfg.Maintenance, c.r, time.Now())
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("start: %v, want one line with %q", err, c.want)
		}
	}

	// The running instance has the last window before its devices fall
	// silent (it reloads within its poll once the version moved).
	e2etest.Eventually(t, 30*time.Second, "the instance loading all the windows", func() bool {
		return inst.Log.Count(fmt.Sprintf("windows=%d ", maintenance.MaxOpen)) > 0
	})
	kept, lost := &device{id: "kept-1"}, &device{id: "lost-1"}
	b := beatTracked(t, e, inst, []*device{kept, lost})
	b.set(func() { kept.silentFrom, lost.silentFrom = time.Now(), time.Now() })
	r, ok := events.Next(20 * time.Second)
	if !ok || r.Ev.DeviceID != "lost-1" || r.Ev.MaintenanceID != "" || r.Ev.DeadlineMs != b.lastBeat("lost-1")+timeout.Milliseconds() {
		t.Fatalf("first event %+v (read: %v), want lost-1's timeout at its last beat + 1s", r.Ev, ok)
	}
	e2etest.EventuallyNil(t, 10*time.Second, "the last window holding kept-1", func() error {
		held, err := inst.Store.HeldCounts(ctx, 4)
		if err != nil || held[last.ID] != 1 {
			return fmt.Errorf("held %v: %v", held, err)
		}
		return nil
	})
	if r, ok := events.Next(2 * time.Second); ok {
		t.Errorf("unexpected event %+v", r.Ev)
	}
	if evs := events.ByDevice()["kept-1"]; len(evs) != 0 {
		t.Errorf("kept-1 fired: %+v", evs)
	}
}
