package e2etest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Fleet beats for its devices into the signals topic: every interval one
// round, all devices with the same ts, until stopped; a device with a
// silence time stops for good at it.
//
// It is not internal/simulate's generator, which `flatline simulate` runs:
// that one spreads each device's beats over the interval and picks the
// silent devices itself, while a verdict needs the silences at the moments
// the test chose and the ts of every silent device's last heartbeat that
// Kafka acknowledged. The heartbeats are the same JSON.
type Fleet struct {
	IDs      []string
	silentAt []time.Time // per device; zero: never silent
	shape    Shape

	mu      sync.Mutex
	last    map[string]int64 // silent devices: ts of the newest acknowledged heartbeat
	rounds  int
	lastAck time.Time     // when Kafka acknowledged the newest round
	maxLag  time.Duration // longest time from a round's ts to the next round's ack
	acked   []round       // every acknowledged round, in order
	err     error

	cancel context.CancelFunc
	done   chan struct{}
}

// round is one acknowledged round: when it was made (its heartbeats' ts)
// and when the fleet saw Kafka acknowledge all of it.
type round struct{ at, ack time.Time }

// stall is a deadline that the fleet's own lateness makes a timeout's
// right one: the devices of round next beat at ts last, and Kafka
// acknowledged next only at or after last + the timeout. Whether the
// heartbeat reached the partition before that deadline (no timeout) or
// after it (a timeout, then a recovered event when it is read) the test
// cannot tell, so either is right.
type stall struct {
	deadlineMs int64
	next       time.Time // when the late round was made: its devices are the stall's
}

// stalls lists the fleet's stalls for a timeout.
func (f *Fleet) stalls(timeout time.Duration) []stall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []stall
	for k := 1; k < len(f.acked); k++ {
		prev, r := f.acked[k-1], f.acked[k]
		if d := prev.at.UnixMilli() + timeout.Milliseconds(); r.ack.UnixMilli() >= d {
			out = append(out, stall{deadlineMs: d, next: r.at})
		}
	}
	return out
}

// IDs names n devices prefix00000, prefix00001, ...
func IDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return ids
}

// SilentSchedule picks n of devices to go silent at uniformly random
// moments within [from, to); the others get the zero time (never).
func SilentSchedule(rng *rand.Rand, devices, n int, from, to time.Time) []time.Time {
	out := make([]time.Time, devices)
	span := to.Sub(from)
	for _, i := range rng.Perm(devices)[:n] {
		out[i] = from.Add(time.Duration(rng.Int64N(int64(span))))
	}
	return out
}

// SilentEvery makes n of devices, evenly spread (every devices/n-th from
// the first), go silent together at at.
func SilentEvery(devices, n int, at time.Time) []time.Time {
	out := make([]time.Time, devices)
	for i := 0; i < devices; i += devices / n {
		out[i] = at
	}
	return out
}

// StartFleet starts beating for ids; silentAt[i] is when ids[i] goes
// silent (zero: never). The fleet stops at the end of the test, if not
// before.
func StartFleet(t testing.TB, brokers []string, ids []string, interval time.Duration, silentAt []time.Time) *Fleet {
	t.Helper()
	return StartFleetWith(t, brokers, nil, ids, interval, silentAt)
}

// StartFleetWith is StartFleet producing with franz-go's client (an
// independent producer, as the collector is an independent consumer)
// configured with opts on top of the fleet's own: keys partitioned by
// murmur2 like any Kafka client, every round acknowledged by all replicas,
// retried until it is (a round that never lands shows in the failure as
// the fleet's last acknowledgement long ago).
func StartFleetWith(t testing.TB, brokers []string, opts []kgo.Opt, ids []string, interval time.Duration, silentAt []time.Time) *Fleet {
	t.Helper()
	return StartShapedFleet(t, brokers, opts, Native, ids, interval, silentAt)
}

// Shape writes one heartbeat of device id at now (ts is now in Unix ms, as
// text) as a record the way some producer writes it; the fleet fills in
// nothing but the topic.
type Shape func(id string, now time.Time, ts string) *kgo.Record

// Native is flatline's own shape: key = the device id, a JSON value.
func Native(id string, now time.Time, ts string) *kgo.Record {
	return &kgo.Record{Key: []byte(id), Value: []byte(`{"device_id":"` + id + `","ts":` + ts + `}`), Timestamp: now}
}

// StartShapedFleet is StartFleetWith writing its heartbeats in shape.
func StartShapedFleet(t testing.TB, brokers []string, opts []kgo.Opt, shape Shape, ids []string, interval time.Duration, silentAt []time.Time) *Fleet {
	t.Helper()
	if len(silentAt) != len(ids) {
		t.Fatalf("fleet: %d silence times for %d devices", len(silentAt), len(ids))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(Signals),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(max(10000, 2*len(ids))),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
	}, opts...)...)
	if err != nil {
		t.Fatalf("fleet: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{IDs: ids, silentAt: silentAt, shape: shape, last: make(map[string]int64), cancel: cancel, done: make(chan struct{})}
	go f.run(ctx, cl, interval)
	t.Cleanup(f.Stop)
	return f
}

func (f *Fleet) run(ctx context.Context, cl *kgo.Client, interval time.Duration) {
	defer close(f.done)
	// Stopping closes the client at once, failing a round that waits on a
	// broker which may not come back (an idempotent produce in flight is
	// not abandoned for a cancelled context alone).
	closed := make(chan struct{})
	closeOnStop := context.AfterFunc(ctx, func() { cl.Close(); close(closed) })
	defer func() {
		if closeOnStop() {
			cl.Close()
		} else {
			<-closed
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	recs := make([]*kgo.Record, 0, len(f.IDs))
	var prev time.Time
	for {
		now := time.Now()
		ms := now.UnixMilli()
		ts := strconv.FormatInt(ms, 10)
		recs = recs[:0]
		for i, id := range f.IDs {
			if s := f.silentAt[i]; !s.IsZero() && !now.Before(s) {
				continue
			}
			recs = append(recs, f.shape(id, now, ts))
		}
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		if err != nil {
			f.err = err
			f.mu.Unlock()
			return
		}
		// Only an acknowledged round counts: a live device is late by the
		// time from its previous heartbeat's ts to this ack, and a silent
		// device's last heartbeat is the last one Kafka has.
		f.rounds++
		f.lastAck = time.Now()
		f.acked = append(f.acked, round{at: now, ack: f.lastAck})
		if !prev.IsZero() {
			f.maxLag = max(f.maxLag, time.Since(prev))
		}
		prev = now
		for i, s := range f.silentAt {
			if !s.IsZero() && now.Before(s) {
				f.last[f.IDs[i]] = ms
			}
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Stop ends the heartbeats and waits for the producer to close.
func (f *Fleet) Stop() {
	f.cancel()
	<-f.done
}

// Rounds is how many rounds of heartbeats Kafka acknowledged.
func (f *Fleet) Rounds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rounds
}

// Err is the error that stopped the fleet's producing, if one did.
func (f *Fleet) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// progress says how many rounds Kafka acknowledged and how long ago the
// newest one was, for a failure that waited on the fleet's devices.
func (f *Fleet) progress() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rounds == 0 {
		return "fleet: no round acknowledged yet"
	}
	return fmt.Sprintf("fleet: %d rounds acknowledged, the newest %v ago", f.rounds, time.Since(f.lastAck).Round(time.Millisecond))
}

// LastBeats returns the ts of each silent device's newest acknowledged
// heartbeat (a device that never beat is absent).
func (f *Fleet) LastBeats() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.last)
}

// SilentIDs are the devices that go silent.
func (f *Fleet) SilentIDs() []string {
	var out []string
	for i, s := range f.silentAt {
		if !s.IsZero() {
			out = append(out, f.IDs[i])
		}
	}
	return out
}

// Silent counts the devices that go silent.
func (f *Fleet) Silent() int { return len(f.SilentIDs()) }

// Fired counts the silent devices that got at least one event in c.
func (f *Fleet) Fired(c *Collector) int { return c.CountDevices(f.SilentIDs()) }
