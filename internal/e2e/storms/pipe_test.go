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
	// widest is the longest a device of the fleet went, outside the
	// outage, from one heartbeat's time to the acknowledgement of its next:
	// the fleet's own lag on a loaded machine.
	widest  time.Duration
	started time.Time

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
	p.cancel, p.started = cancel, time.Now()
	go p.run(ctx, t, w)
	t.Cleanup(p.stop)
	return p
}

func (p *pipe) run(ctx context.Context, t *testing.T, w *kafka.Writer) {
	defer close(p.done)
	defer w.Close()
	slotEvery := p.interval / phases
	tick := time.NewTicker(slotEvery)
	defer tick.Stop()
	sent := make([]int64, len(p.ids)) // each device's last heartbeat's time (Unix ms), 0 after the outage
	var beat []int
	for next := 0; ; {
		now := time.Now()
		ts := strconv.FormatInt(now.UnixMilli(), 10)
		// Every slot due by now beats, however long the last write took:
		// a device's interval stays the interval on a loaded machine (a
		// round that falls a whole interval behind sends each device once).
		due := int(now.Sub(p.started) / slotEvery)
		next = max(next, due-phases+1)
		var msgs []kafka.Message
		beat = beat[:0]
		p.mu.Lock()
		back := !p.backAt.IsZero() || p.downAt.IsZero()
		for i, id := range p.ids {
			// A late device beats at once when it comes back, then at its
			// phase again.
			back := p.late[i] && !p.backAt.IsZero() && !now.Before(p.backAt.Add(p.lateBy)) && !p.returnedLate[i]
			if back {
				p.returnedLate[i] = true
			}
			if !back && !inSlots(i%phases, next, due) {
				continue
			}
			if p.down && (p.stopOnly == nil || p.stopOnly[p.partition(i)]) {
				sent[i] = 0 // the gap across the outage is the outage
				continue
			}
			if d, ok := p.deadAt[i]; ok && !now.Before(d) {
				continue
			}
			if p.late[i] && !p.downAt.IsZero() && (p.backAt.IsZero() || now.Before(p.backAt.Add(p.lateBy))) && (p.stopOnly == nil || p.stopOnly[p.partition(i)]) {
				sent[i] = 0
				continue
			}
			msgs = append(msgs, kafka.Message{Key: []byte(id), Value: []byte(`{"device_id":"` + id + `","ts":` + ts + `}`), Time: now})
			beat = append(beat, i)
		}
		p.mu.Unlock()
		next = due + 1
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				if ctx.Err() != nil {
					return
				}
				t.Errorf("pipe: produce: %v", err)
				return
			}
		}
		acked := time.Now().UnixMilli()
		p.mu.Lock()
		if !back && !p.down {
			p.backAt = time.Now()
		}
		// A device's gap: from its last heartbeat's time to this one's
		// acknowledgement, the longest its deadline had to wait for it.
		for _, i := range beat {
			if sent[i] > 0 {
				p.widest = max(p.widest, time.Duration(acked-sent[i])*time.Millisecond)
			}
			sent[i] = now.UnixMilli()
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// inSlots reports whether slot (of phases) is among the absolute slots
// from..to.
func inSlots(slot, from, to int) bool {
	if to-from+1 >= phases {
		return true
	}
	for s := from; s <= to; s++ {
		if s%phases == slot {
			return true
		}
	}
	return false
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

// lag is the longest a device of the fleet went, outside the outage,
// between a heartbeat's time and the acknowledgement of its next, logged
// for the test: a fleet that falls a timeout less stall_after behind on a
// loaded machine makes its own devices time out, and a test's failure then
// says so beside its count.
func (p *pipe) lag(t *testing.T) time.Duration {
	t.Helper()
	p.mu.Lock()
	widest := p.widest
	p.mu.Unlock()
	t.Logf("the fleet's longest gap between a device's heartbeats outside the outage: %v (interval %v)", widest, p.interval)
	return widest
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
