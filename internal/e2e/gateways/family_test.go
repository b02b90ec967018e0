package gateways

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/timeouts"
)

const (
	beatEvery      = 400 * time.Millisecond
	childTimeout   = 2 * time.Second
	gatewayTimeout = 4 * time.Second
	// phases spreads the devices' heartbeats over beatEvery.
	phases = 4
)

// family is a fleet of gateways and their children beating into the
// signals topic, each every beatEvery at a phase of its own, naming its
// parent, until the test silences it.
type family struct {
	gateways []string
	children map[string][]string // gateway -> its children
	inst     *e2etest.Instance
	cfg      configs.Config

	mu     sync.Mutex
	silent map[string]bool
	// returning are the devices silenced and let beat again, until their
	// first heartbeat after it; back is that heartbeat's ts.
	returning map[string]bool
	back      map[string]int64

	cancel context.CancelFunc
	done   chan struct{}
}

// startFamily starts gateways g-0 … each with n children g-0/c-0 … and an
// instance of flatline reading them.
func startFamily(t *testing.T, gateways, n int) (*family, *e2etest.Collector) {
	t.Helper()
	env := e2etest.NewEnv(t, 4)
	return startFamilyOn(t, env.Cfg, env.Kafka, gateways, n)
}

// startFamilyOn is startFamily with flatline configured by cfg, on kf.
func startFamilyOn(t *testing.T, cfg configs.Config, kf *testenv.KafkaCluster, gateways, n int) (*family, *e2etest.Collector) {
	t.Helper()
	cfg.Storm.MaxHold = 0
	inst := e2etest.Start(t, cfg, app.Hooks{})
	f := &family{children: map[string][]string{}, silent: map[string]bool{}, returning: map[string]bool{}, back: map[string]int64{},
		done: make(chan struct{}), inst: inst, cfg: cfg}
	for g := range gateways {
		gw := fmt.Sprintf("g-%d", g)
		f.gateways = append(f.gateways, gw)
		for c := range n {
			f.children[gw] = append(f.children[gw], fmt.Sprintf("%s/c-%d", gw, c))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	w := e2etest.NewWriter(kf.Brokers(), e2etest.Signals)
	go f.run(ctx, t, w)
	t.Cleanup(func() { f.cancel(); <-f.done })
	f.tracked(t, inst, cfg.Shards.InitialCount)
	return f, e2etest.Collect(t, kf.Brokers(), e2etest.Timeouts, 4)
}

func (f *family) run(ctx context.Context, t *testing.T, w *kafka.Writer) {
	defer close(f.done)
	defer w.Close()
	tick := time.NewTicker(beatEvery / phases)
	defer tick.Stop()
	for slot := 0; ; slot++ {
		now := time.Now()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		var msgs []kafka.Message
		f.mu.Lock()
		k := 0
		beat := func(id, extra string) {
			if k++; k%phases == slot%phases && !f.silent[id] {
				msgs = append(msgs, kafka.Message{Key: []byte(id), Time: now,
					Value: []byte(`{"device_id":"` + id + `","ts":` + ts + extra + `}`)})
				if f.returning[id] {
					delete(f.returning, id)
					f.back[id] = now.UnixMilli()
				}
			}
		}
		for _, gw := range f.gateways {
			beat(gw, `,"timeout_ms":`+strconv.FormatInt(gatewayTimeout.Milliseconds(), 10))
			for _, c := range f.children[gw] {
				beat(c, `,"timeout_ms":`+strconv.FormatInt(childTimeout.Milliseconds(), 10)+`,"parent":"`+gw+`"`)
			}
		}
		f.mu.Unlock()
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() == nil {
					t.Errorf("family: produce: %v", err)
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// silence stops (or, with on false, restarts) the heartbeats of ids.
func (f *family) silence(on bool, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if f.silent[id] && !on {
			f.returning[id] = true
		}
		f.silent[id] = on
	}
}

// backAt is the ts of id's first heartbeat after its silence ended.
func (f *family) backAt(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.back[id]
}

// all are every device of the family.
func (f *family) all() []string {
	out := append([]string(nil), f.gateways...)
	for _, gw := range f.gateways {
		out = append(out, f.children[gw]...)
	}
	return out
}

// tracked waits until every device of the family is tracked.
func (f *family) tracked(t *testing.T, inst *e2etest.Instance, shards int) {
	t.Helper()
	want := int64(len(f.all()))
	e2etest.Eventually(t, 30*time.Second, "every device tracked", func() bool {
		n, err := inst.App.Store.Tracked(context.Background(), shards)
		return err == nil && n == want
	})
}

// device looks id up as `flatline device get` does.
func (f *family) device(t *testing.T, id string) inspect.Device {
	t.Helper()
	d, err := inspect.GetDevice(context.Background(), f.inst.App.Store, timeouts.NewPolicy(timeouts.DefaultConfig(), nil), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// down lists the devices down as `flatline devices down --parent` does.
func (f *family) down(t *testing.T, parent string) []inspect.DownDevice {
	t.Helper()
	l, err := inspect.ListDown(context.Background(), f.inst.App.Store, timeouts.NewPolicy(timeouts.DefaultConfig(), nil),
		inspect.DownQuery{Parent: parent, Limit: 10_000}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return l.Devices
}

// metrics gathers the instance's metrics as a scrape of /metrics would.
func (f *family) metrics(t *testing.T) e2etest.Metrics {
	t.Helper()
	fams, err := f.inst.App.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := e2etest.Metrics{}
	for _, fam := range fams {
		m[fam.GetName()] = fam
	}
	return m
}
