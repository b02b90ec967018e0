package scanner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
)

// familyRig is a scanner with its gateway step over two shards of a
// private Redis, publishing to a private Kafka, firing by the clock (the
// watermark raised far ahead).
type familyRig struct {
	store   *shard.Store
	brokers []string
	m       *metrics.Metrics
}

const familyShards = 2

func newFamilyRig(t *testing.T, maxHold time.Duration) *familyRig {
	t.Helper()
	store, _ := newStore(t)
	kf := testenv.Kafka(t, 1, "device-timeouts")
	_, m := startScanner(t, store, kf.Brokers(), scannerSetup{
		watermark: time.Now().Add(time.Hour), layout: fixedLayout{l: shard.Layout{Count: familyShards}}, shards: []int{0, 1},
		gateways: &scanner.GatewaysConfig{MaxHold: maxHold},
	})
	return &familyRig{store: store, brokers: kf.Brokers(), m: m}
}

// device is a device written as ingest writes it: last heard at lastMs,
// its own timeout (an override), and its parent.
type device struct {
	id, parent string
	lastMs     int64
	timeout    time.Duration
}

func (r *familyRig) write(t *testing.T, ds ...device) {
	t.Helper()
	var b shard.Batch
	b.Reset(familyShards)
	for _, d := range ds {
		i := shard.Of(shard.Hash(d.id), familyShards)
		b.Add(i, d.id, shard.Score(d.lastMs+d.timeout.Milliseconds(), shard.NewMeta(0, shard.FlagOverride)), d.timeout.Milliseconds())
		if d.parent != "" {
			b.SetParent(i, d.id, d.parent, shard.Of(shard.Hash(d.parent), familyShards))
		}
	}
	if _, err := r.store.Write(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

// events waits until the timeouts topic holds n events and returns them
// by device id.
func (r *familyRig) events(t *testing.T, n int) map[string]dispatch.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs := testenv.ReadTopic(t, r.brokers, "device-timeouts", 1)
		if len(msgs) >= n || time.Now().After(deadline) {
			out := make(map[string]dispatch.Event)
			for _, m := range msgs {
				var e dispatch.Event
				if err := json.Unmarshal(m.Value, &e); err != nil {
					t.Fatal(err)
				}
				if _, dup := out[e.DeviceID]; dup {
					t.Errorf("two events of %s", e.DeviceID)
				}
				out[e.DeviceID] = e
			}
			if len(msgs) != n {
				t.Fatalf("%d events, want %d: %v", len(msgs), n, out)
			}
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A gateway silent since before its children's last heartbeats times out;
// its children, due first, are held, then published as unreachable with
// the event id their timeout would have had; its timeout counts them. A
// child whose parent is not tracked fires a plain timeout, naming it.
func TestChildrenOfADeadGatewayAreUnreachable(t *testing.T) {
	t.Parallel()
	r := newFamilyRig(t, time.Minute)
	now := time.Now().UnixMilli()
	children := []device{
		{id: "c1", parent: "gw", lastMs: now - 2500, timeout: 2 * time.Second},
		{id: "c2", parent: "gw", lastMs: now - 2400, timeout: 2 * time.Second},
		{id: "c3", parent: "gw", lastMs: now - 2300, timeout: 2 * time.Second},
		{id: "lone", parent: "nobody", lastMs: now - 2500, timeout: 2 * time.Second},
	}
	r.write(t, device{id: "gw", lastMs: now - 9000, timeout: 10 * time.Second})
	r.write(t, children...)
	got := r.events(t, 5)
	gw := got["gw"]
	if gw.Type != dispatch.TypeTimeout || gw.ChildrenHeld == nil || *gw.ChildrenHeld != 3 {
		t.Errorf("gateway's event %+v, want a timeout with children_held 3", gw)
	}
	for _, c := range children[:3] {
		e := got[c.id]
		deadline := c.lastMs + c.timeout.Milliseconds()
		if e.Type != dispatch.TypeUnreachable || e.Parent != "gw" || e.DeadlineMs != deadline || e.LastSeenMs != c.lastMs ||
			e.EventID != dispatch.TimeoutEventID(c.id, deadline) {
			t.Errorf("%s: %+v, want unreachable under gw at its own deadline %d", c.id, e, deadline)
		}
		if e.DetectedAtMs > gw.DetectedAtMs+1000 {
			t.Errorf("%s detected at %d, more than 1s after its parent's timeout (%d)", c.id, e.DetectedAtMs, gw.DetectedAtMs)
		}
		if ds, ok, _ := r.store.DownScore(context.Background(), shard.Of(shard.Hash(c.id), familyShards), c.id); !ok || ds != shard.Score(deadline, shard.NewMeta(0, shard.FlagOverride)) {
			t.Errorf("%s down at %v (%v), want its own deadline", c.id, ds, ok)
		}
	}
	if e := got["lone"]; e.Type != dispatch.TypeTimeout || e.Parent != "nobody" || e.ChildrenHeld != nil {
		t.Errorf("lone: %+v, want a timeout naming its untracked parent", e)
	}
}

// A child held for its silent gateway gets its own timeout from the
// gateway's heartbeat when the gateway beats again, and fires then, naming
// it; a gateway that stays silent, but not dead, holds a child at most
// gateways.max_hold, then the child fires at its own deadline.
func TestHeldChildGetsItsTimeoutFromItsGatewaysReturnOrMaxHold(t *testing.T) {
	t.Parallel()
	r := newFamilyRig(t, 1500*time.Millisecond)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	r.write(t, device{id: "gw", lastMs: now - 97_000, timeout: 100 * time.Second})
	r.write(t, device{id: "gw-silent", lastMs: now - 97_000, timeout: 100 * time.Second})
	r.write(t, device{id: "c", parent: "gw", lastMs: now - 1500, timeout: time.Second},
		device{id: "d", parent: "gw-silent", lastMs: now - 1500, timeout: time.Second})
	i := shard.Of(shard.Hash("c"), familyShards)
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := r.store.Waiting(ctx, i, "c")
		if err != nil {
			t.Fatal(err)
		}
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	back := time.Now().UnixMilli()
	r.write(t, device{id: "gw", lastMs: back, timeout: 100 * time.Second})
	got := r.events(t, 2)
	if e := got["c"]; e.Type != dispatch.TypeTimeout || e.Parent != "gw" || e.LastSeenMs != back || e.DeadlineMs != back+1000 {
		t.Errorf("c: %+v, want a timeout under gw from its return %d", e, back)
	}
	if e := got["d"]; e.Type != dispatch.TypeTimeout || e.Parent != "gw-silent" || e.DeadlineMs != now-500 ||
		e.DetectedAtMs < now-500+1500 {
		t.Errorf("d: %+v, want a timeout at its own deadline %d once max_hold passed", e, now-500)
	}
}

// Chains hold by construction: a gateway behind a router is the router's
// child. The router dies with everything behind it: its timeout counts the
// gateway it held, the gateway is unreachable (counting its own held
// child), and the gateway's child is unreachable too, not a timeout: a
// held gateway's score is its hold's, not a heartbeat's.
func TestAChainOfGatewaysHolds(t *testing.T) {
	t.Parallel()
	r := newFamilyRig(t, time.Minute)
	now := time.Now().UnixMilli()
	r.write(t, device{id: "router", lastMs: now - 9000, timeout: 10 * time.Second})
	r.write(t, device{id: "gw", parent: "router", lastMs: now - 2500, timeout: 2 * time.Second},
		device{id: "c", parent: "gw", lastMs: now - 2400, timeout: 2 * time.Second})
	got := r.events(t, 3)
	if e := got["router"]; e.Type != dispatch.TypeTimeout || e.ChildrenHeld == nil || *e.ChildrenHeld != 1 {
		t.Errorf("router: %+v, want a timeout with children_held 1", e)
	}
	if e := got["gw"]; e.Type != dispatch.TypeUnreachable || e.Parent != "router" || e.ChildrenHeld == nil || *e.ChildrenHeld != 1 {
		t.Errorf("gw: %+v, want unreachable under router with children_held 1", e)
	}
	if e := got["c"]; e.Type != dispatch.TypeUnreachable || e.Parent != "gw" || e.DeadlineMs != now-400 {
		t.Errorf("c: %+v, want unreachable under gw at its own deadline", e)
	}
}
