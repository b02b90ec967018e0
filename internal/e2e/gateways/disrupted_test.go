package gateways

import (
	"context"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
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

// On a 3-master Redis Cluster, where a gateway and its children sit in
// shards on other masters and every script touches one shard's slot: the
// same one alarm per gateway, its children unreachable, seen as such.
func TestDeadGatewaysOnCluster(t *testing.T) {
	t.Parallel()
	c := testenv.RedisCluster(t, 3)
	kf := testenv.Kafka(t, 4, e2etest.Topics...)
	f, col := startFamilyOn(t, e2etest.Config(t, c.Addrs(), kf.Brokers()), kf, 3, 30)
	f.silence(true, f.all()...)
	got := events(t, col, 93)
	for _, gw := range f.gateways {
		if es := got[gw]; len(es) != 1 || es[0].Ev.ChildrenHeld == nil || *es[0].Ev.ChildrenHeld != 30 {
			t.Errorf("%s: %+v, want one timeout with children_held 30", gw, es)
		}
		for _, id := range f.children[gw] {
			if es := got[id]; len(es) != 1 || es[0].Ev.Type != dispatch.TypeUnreachable || es[0].Ev.Parent != gw {
				t.Errorf("%s: %+v, want one unreachable under %s", id, es, gw)
			}
		}
	}
	if n, ok := f.metrics(t).Value("flatline_devices_down", "class", "", "state", "unreachable"); !ok || n != 90 {
		t.Errorf("flatline_devices_down{state=unreachable} = %v (present %v), want 90", n, ok)
	}
	if down := f.down(t, "g-1"); len(down) != 30 {
		t.Errorf("devices down --parent g-1: %d, want 30", len(down))
	}
}
