package maintenance

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// startInstance starts a maintenance test's deployment: a Redis and a Kafka
// of its own, one instance over 4 shards where devices time out after
// timeout (class meter after meterTimeout), and a collector of the
// timeouts topic.
func startInstance(t *testing.T) (*e2etest.Env, *e2etest.Instance, *e2etest.Collector) {
	t.Helper()
	e := e2etest.NewEnv(t, partitions)
	e.Cfg.Timeouts.Default = timeout
	e.Cfg.Timeouts.Classes = map[string]time.Duration{"meter": meterTimeout}
	e.Cfg.Shards.InitialCount = 4
	inst := e2etest.Start(t, e.Cfg, app.Hooks{})
	return e, inst, e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, partitions)
}

// beatTracked starts a beater of devices on e's Kafka, every interval, and
// waits until inst tracks every one of them.
func beatTracked(t *testing.T, e *e2etest.Env, inst *e2etest.Instance, devices []*device) *beater {
	t.Helper()
	b := startBeater(t, e.Kafka.Brokers(), devices, interval)
	e2etest.Eventually(t, 30*time.Second, "every device tracked", func() bool {
		n, err := inst.Store.Tracked(t.Context(), 4)
		return err == nil && n == int64(len(devices))
	})
	return b
}

// device is one device of the beater: silent from silentFrom (zero: never)
// until silentUntil (zero: for good), and for good from diesAt (zero:
// never), with a class ("" for none).
type device struct {
	id          string
	class       string
	silentFrom  time.Time
	silentUntil time.Time
	diesAt      time.Time
}

func (d *device) beats(now time.Time) bool {
	if !d.diesAt.IsZero() && !now.Before(d.diesAt) {
		return false
	}
	if d.silentFrom.IsZero() || now.Before(d.silentFrom) {
		return true
	}
	return !d.silentUntil.IsZero() && !now.Before(d.silentUntil)
}

// beater produces a heartbeat of every device that beats, every interval,
// and remembers each device's last acknowledged heartbeat.
type beater struct {
	mu      sync.Mutex
	devices []*device
	last    map[string]int64
	cancel  context.CancelFunc
	done    chan struct{}
}

func startBeater(t *testing.T, brokers []string, devices []*device, interval time.Duration) *beater {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(e2etest.Signals),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &beater{devices: devices, last: map[string]int64{}, cancel: cancel, done: make(chan struct{})}
	go b.run(ctx, cl, interval)
	t.Cleanup(func() { b.cancel(); <-b.done; cl.Close() })
	return b
}

// set changes the devices' silences (under the beater's lock).
func (b *beater) set(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn()
}

func (b *beater) run(ctx context.Context, cl *kgo.Client, interval time.Duration) {
	defer close(b.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		now := time.Now()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		var recs []*kgo.Record
		var ids []string
		b.mu.Lock()
		for _, d := range b.devices {
			if !d.beats(now) {
				continue
			}
			v := `{"device_id":"` + d.id + `","ts":` + ts
			if d.class != "" {
				v += `,"class":"` + d.class + `"`
			}
			recs = append(recs, &kgo.Record{Key: []byte(d.id), Value: []byte(v + "}"), Timestamp: now})
			ids = append(ids, d.id)
		}
		b.mu.Unlock()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err == nil {
			b.mu.Lock()
			for _, id := range ids {
				b.last[id] = now.UnixMilli()
			}
			b.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lastBeat is the ts of id's last acknowledged heartbeat.
func (b *beater) lastBeat(id string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last[id]
}
