package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// deviceState is where a device is in its life.
type deviceState uint8

const (
	live   deviceState = iota // beats every interval
	silent                    // stopped beating: must fire exactly once
	left                      // tombstoned, then silent: must never fire
)

func (s deviceState) String() string {
	return [...]string{"live", "silent", "left"}[s]
}

// device is one device of the fleet. lastAck is written by the producer's
// callbacks, everything else under fleet.mu.
type device struct {
	id      string
	bucket  int
	state   deviceState
	joined  time.Time // zero for the devices of the start
	changed time.Time // when it went silent or left
	liveIdx int       // its index in fleet.live while live
	// lastAck is the ts (Unix ms) of its last heartbeat Kafka
	// acknowledged: a silent device's timeout is due at lastAck + timeout,
	// and its event_id says so.
	lastAck atomic.Int64
}

// fleet beats every live device once per interval, each at its own phase
// (a bucket of tick width), from one goroutine (Run), through one
// franz-go producer. Join, Leave and Silence change it under mu, so a
// tombstone is produced after its device's last heartbeat: same key, same
// partition, in order.
type fleet struct {
	cl       *kgo.Client
	interval time.Duration
	tick     time.Duration
	buckets  [][]*device

	mu     sync.Mutex
	rng    *rand.Rand
	devs   []*device
	live   []*device
	nextID int

	sent, failed, tombstones atomic.Int64
	// maxAckLag is the longest a heartbeat took from being handed to the
	// producer to its acknowledgement, and maxTickLag the furthest the
	// fleet fell behind its own schedule, in ns: a fleet late by more than
	// timeout − interval would make a live device fire through no fault of
	// flatline's.
	maxAckLag, maxTickLag atomic.Int64
}

// fleetTick is the phase resolution: every device beats at one of
// interval/fleetTick phases.
const fleetTick = 10 * time.Millisecond

func newFleet(brokers []string, topic string, devices int, interval time.Duration) (*fleet, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		// Keyed records go to a partition by murmur2 of the key, as a
		// Java client sends them: a device stays on one partition, in
		// order; the idempotent producer (franz-go's default) keeps that
		// order across retries.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		return nil, err
	}
	nb := max(1, int(interval/fleetTick))
	f := &fleet{cl: cl, interval: interval, tick: interval / time.Duration(nb), buckets: make([][]*device, nb),
		rng: rand.New(rand.NewPCG(1, 2))}
	for i := range devices {
		f.add(i*nb/devices, time.Time{})
	}
	return f, nil
}

// add makes a live device in bucket b; the caller holds mu (or owns f).
func (f *fleet) add(b int, joined time.Time) *device {
	d := &device{id: fmt.Sprintf("soak-%06d", f.nextID), bucket: b, joined: joined, liveIdx: len(f.live)}
	f.nextID++
	f.devs = append(f.devs, d)
	f.live = append(f.live, d)
	f.buckets[b] = append(f.buckets[b], d)
	return d
}

// Run beats until ctx ends, then flushes what is buffered.
func (f *fleet) Run(ctx context.Context) error {
	defer f.cl.Close()
	t := time.NewTicker(f.tick)
	defer t.Stop()
	start := time.Now()
	var done int64 // buckets processed since start
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return f.cl.Flush(fctx)
		case now := <-t.C:
			due := int64(now.Sub(start) / f.tick)
			if due <= done {
				continue
			}
			if lag := now.Sub(start.Add(time.Duration(done+1) * f.tick)); lag > time.Duration(f.maxTickLag.Load()) {
				f.maxTickLag.Store(int64(lag))
			}
			f.mu.Lock()
			for ; done < due; done++ {
				for _, d := range f.buckets[done%int64(len(f.buckets))] {
					if d.state == live {
						buf = f.beat(d, now, buf)
					}
				}
			}
			f.mu.Unlock()
		}
	}
}

// beat produces d's heartbeat at now: {"device_id":…,"ts":…} with the same
// record timestamp, so flatline takes ts as it is.
func (f *fleet) beat(d *device, now time.Time, buf []byte) []byte {
	ts := now.UnixMilli()
	buf = append(buf[:0], `{"device_id":"`...)
	buf = append(buf, d.id...)
	buf = append(buf, `","ts":`...)
	buf = strconv.AppendInt(buf, ts, 10)
	buf = append(buf, '}')
	rec := &kgo.Record{Key: []byte(d.id), Value: append([]byte(nil), buf...), Timestamp: now}
	// Not Run's context: its end must not fail what is still buffered.
	f.cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		if err != nil {
			f.failed.Add(1)
			return
		}
		f.sent.Add(1)
		f.noteAckLag(time.Since(now))
		for {
			old := d.lastAck.Load()
			if ts <= old || d.lastAck.CompareAndSwap(old, ts) {
				break
			}
		}
	})
	return buf
}

func (f *fleet) noteAckLag(lag time.Duration) {
	for {
		old := f.maxAckLag.Load()
		if int64(lag) <= old || f.maxAckLag.CompareAndSwap(old, int64(lag)) {
			return
		}
	}
}

// Join adds n devices at random phases; each beats within an interval.
func (f *fleet) Join(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for range n {
		f.add(f.rng.IntN(len(f.buckets)), now)
	}
}

// Leave tombstones n live devices that have beaten (a null value keyed by
// the device), after which they never beat again.
func (f *fleet) Leave(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	ds := f.pick(n, left, now)
	for _, d := range ds {
		rec := &kgo.Record{Key: []byte(d.id), Timestamp: now}
		f.cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
			if err != nil {
				f.failed.Add(1)
				return
			}
			f.tombstones.Add(1)
		})
	}
	return len(ds)
}

// Silence stops n live devices that have beaten.
func (f *fleet) Silence(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pick(n, silent, time.Now()))
}

// pick moves up to n random live devices with an acknowledged heartbeat
// to state to; the caller holds mu.
func (f *fleet) pick(n int, to deviceState, now time.Time) []*device {
	var out []*device
	for tries := 0; len(out) < n && tries < 50*n && len(f.live) > 0; tries++ {
		d := f.live[f.rng.IntN(len(f.live))]
		if d.lastAck.Load() == 0 {
			continue // a joiner that has not beaten yet
		}
		last := f.live[len(f.live)-1]
		f.live[d.liveIdx], last.liveIdx = last, d.liveIdx
		f.live = f.live[:len(f.live)-1]
		d.state, d.changed = to, now
		out = append(out, d)
	}
	return out
}

// fleetCounts is how many devices are in each state.
type fleetCounts struct {
	Started int `json:"started"`
	Joined  int `json:"joined"`
	Live    int `json:"live"`
	Silent  int `json:"silent"`
	Left    int `json:"left"`
}

func (f *fleet) counts() fleetCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	var c fleetCounts
	for _, d := range f.devs {
		if d.joined.IsZero() {
			c.Started++
		} else {
			c.Joined++
		}
		switch d.state {
		case live:
			c.Live++
		case silent:
			c.Silent++
		case left:
			c.Left++
		}
	}
	return c
}

// devices returns every device; read their fields only once Run has
// returned.
func (f *fleet) devices() []*device {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*device(nil), f.devs...)
}
