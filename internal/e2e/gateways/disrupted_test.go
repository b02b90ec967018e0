package gateways

import (
	"context"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/rebalance"
)

// A gateway dies with its children; while they are held for it flatline
// restarts (test restart) or the shards double (test scale). Either way:
// the gateway's one timeout counting its held children, each child once
// unreachable with its own deadline's event id (a restart may publish an
// event again: the copies share their event id), no child timeout.
func TestDeadGatewayAcrossDisruptions(t *testing.T) {
	t.Parallel()
	for name, disrupt := range map[string]func(t *testing.T, f *family){
		"restart": func(t *testing.T, f *family) {
			if err := f.inst.Stop(); err != nil {
				t.Fatal(err)
			}
			f.inst = e2etest.Start(t, f.cfg, app.Hooks{})
		},
		"scale": func(t *testing.T, f *family) {
			if _, err := rebalance.Scale(context.Background(), f.inst.App.Store, 2*f.cfg.Shards.InitialCount, time.Now()); err != nil {
				t.Fatal(err)
			}
			// The instance routes by the doubled layout while its children
			// are still held: the migration runs during the hold.
			e2etest.Eventually(t, 10*time.Second, "the doubled layout loaded", func() bool {
				return f.inst.App.Watcher.Current().Count == 2*f.cfg.Shards.InitialCount
			})
			if f.device(t, f.children["g-0"][0]).State != inspect.StateHeld {
				t.Log("the children's hold ended before the instance loaded the doubled layout")
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, c := startFamily(t, 1, 50)
			kids := f.children["g-0"]
			f.silence(true, f.all()...)
			e2etest.Eventually(t, gatewayTimeout, "the children held", func() bool {
				return f.device(t, kids[0]).State == inspect.StateHeld && f.device(t, kids[len(kids)-1]).State == inspect.StateHeld
			})
			disrupt(t, f)
			e2etest.Eventually(t, 60*time.Second, "every child's event", func() bool { return c.CountDevices(f.all()) == len(f.all()) })
			time.Sleep(2 * time.Second) // anything more would come within the slowest path's second
			got := c.ByDevice()
			for _, e := range got["g-0"] {
				if e.Ev.Type != dispatch.TypeTimeout || e.Ev.ChildrenHeld == nil || *e.Ev.ChildrenHeld != 50 || e.Ev.EventID != got["g-0"][0].Ev.EventID {
					t.Errorf("g-0: %+v, want its timeout with children_held 50", e.Ev)
				}
			}
			for _, id := range kids {
				for _, e := range got[id] {
					if e.Ev.Type != dispatch.TypeUnreachable || e.Ev.Parent != "g-0" || e.Ev.DeadlineMs != e.Ev.LastSeenMs+childTimeout.Milliseconds() ||
						e.Ev.EventID != got[id][0].Ev.EventID {
						t.Errorf("%s: %+v, want unreachable under g-0 at its own deadline, once", id, e.Ev)
					}
				}
			}
		})
	}
}
