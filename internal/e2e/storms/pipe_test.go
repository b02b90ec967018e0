package storms

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// pipe is a fleet behind a pipe that can break: each device beats every
// interval at a phase of its own (one of phases slots), as independent
// devices do, so a partition's records arrive all the time; none arrive
// while the pipe is down. A device beats unless it is dead (from its death on) or late
// (from the pipe's break until lateBy after its return).
type pipe struct {
	ids      []string
	interval time.Duration
	// partitionOf, if set, sends device i to that partition: the other
	// partitions see none of its traffic.
	partitionOf func(i int) int

	mu     sync.Mutex
	down   bool      // the pipe is broken: nothing is produced
	downAt time.Time // when it broke
	backAt time.Time // when the first round after it was acknowledged
	deadAt map[int]time.Time
	late   map[int]bool
	// returnedLate marks the late devices that beat since they came back.
	returnedLate map[int]bool
	lateBy       time.Duration
	stopOnly     map[int]bool // partitions the outage stops (nil: all)

	cancel context.CancelFunc
	done   chan struct{}
}

// startPipe starts beating for ids; partitionOf, if not nil, places each
// device's heartbeats (else murmur2 of the key, as any producer would).
func startPipe(t *testing.T, brokers []string, ids []string, interval time.Duration, partitionOf func(i int) int) *pipe {
	t.Helper()
	p := &pipe{ids: ids, interval: interval, partitionOf: partitionOf, deadAt: map[int]time.Time{}, late: map[int]bool{}, returnedLate: map[int]bool{}, done: make(chan struct{})}
	w := e2etest.NewWriter(brokers, e2etest.Signals)
	if partitionOf != nil {
		of := make(map[string]int, len(ids))
		for i, id := range ids {
			of[id] = partitionOf(i)
		}
		w.Balancer = kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return of[string(m.Key)] })
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.run(ctx, t, w)
	t.Cleanup(p.stop)
	return p
}

func (p *pipe) run(ctx context.Context, t *testing.T, w *kafka.Writer) {
	defer close(p.done)
	defer w.Close()
	tick := time.NewTicker(p.interval / phases)
	defer tick.Stop()
	for slot := 0; ; slot = (slot + 1) % phases {
		now := time.Now()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		var msgs []kafka.Message
		p.mu.Lock()
		back := !p.backAt.IsZero() || p.downAt.IsZero()
		for i, id := range p.ids {
			// A late device beats at once when it comes back, then at its
			// phase again.
			back := p.late[i] && !p.backAt.IsZero() && !now.Before(p.backAt.Add(p.lateBy)) && !p.returnedLate[i]
			if back {
				p.returnedLate[i] = true
			}
			if i%phases != slot && !back {
				continue
			}
			if p.down && (p.stopOnly == nil || p.stopOnly[p.partition(i)]) {
				continue
			}
			if d, ok := p.deadAt[i]; ok && !now.Before(d) {
				continue
			}
			if p.late[i] && !p.downAt.IsZero() && (p.backAt.IsZero() || now.Before(p.backAt.Add(p.lateBy))) && (p.stopOnly == nil || p.stopOnly[p.partition(i)]) {
				continue
			}
			msgs = append(msgs, kafka.Message{Key: []byte(id), Value: []byte(`{"device_id":"` + id + `","ts":` + ts + `}`), Time: now})
		}
		p.mu.Unlock()
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() != nil {
					return
				}
				t.Errorf("pipe: produce: %v", err)
				return
			}
		}
		p.mu.Lock()
		if !back && !p.down {
			p.backAt = time.Now()
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// phases is how many slots an interval has: device i beats in slot i%phases.
const phases = 20

func (p *pipe) partition(i int) int {
	if p.partitionOf == nil {
		return 0
	}
	return p.partitionOf(i)
}

// breakFor breaks the pipe (for the partitions in only, all when nil) at
// once and mends it after d; the devices in dead die at moments spread
// over the outage, the ones in late come back lateBy after the others.
func (p *pipe) breakFor(d time.Duration, dead, late []int, lateBy time.Duration, only map[int]bool) {
	now := time.Now()
	p.mu.Lock()
	p.down, p.downAt, p.stopOnly, p.lateBy = true, now, only, lateBy
	for k, i := range dead {
		p.deadAt[i] = now.Add(time.Duration(k) * d / time.Duration(len(dead)+1))
	}
	for _, i := range late {
		p.late[i] = true
	}
	p.mu.Unlock()
	time.Sleep(d) // the outage itself: what the test is about, not a wait for a result
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// returned is when the first round after the outage was acknowledged.
func (p *pipe) returned() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backAt
}

func (p *pipe) stop() {
	p.cancel()
	<-p.done
}
