package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// TestRollingRestart restarts three real `flatline serve` processes one at
// a time, as a Kubernetes rolling update does (SIGTERM, start the
// replacement, wait until it is ready, pause 2 s), while 3,000 devices
// beat every 500 ms and 150 go silent during the restarts. docs/operations.md,
// "Rolling restarts": no false and no missed timeout, and each stopping
// instance leaves the consumer group at once (its partitions are not held
// for a session timeout).
//
// It reports, per step, how long firing was held — the longest time the
// firing watermark (min over partitions, read from Redis every 10 ms)
// stood still behind the clock — and the lateness of the silences whose
// deadline fell into the restarts.
func TestRollingRestart(t *testing.T) {
	t.Parallel()
	const session = 6 * time.Second
	rng := seed(t)
	r := newServeRig(t, e2etest.Scenario{
		Devices: 3000, Silent: 150, Interval: 500 * time.Millisecond, Timeout: 2 * time.Second, Partitions: 8, Shards: 16,
	}, 4000, "flatline serve ×3")
	k, logs := r.Kafka, r.logs
	group := r.Cfg.Kafka.GroupID
	envFor := func(id string) []string {
		return r.env(map[string]string{
			"FLATLINE_INSTANCE_ID":           id,
			"FLATLINE_HTTP_ADDR":             "127.0.0.1:0",
			"FLATLINE_KAFKA_SESSION_TIMEOUT": session.String(),
		})
	}
	// start runs an instance and waits until /readyz answers 200 and the
	// group has every member it should.
	start := func(id string, members int) *testenv.Process {
		instLogs := e2etest.NewLogBuffer(200)
		addrs := httpAddrOf(instLogs)
		instLogs.Watch(func(line string) { _, _ = logs.Write([]byte(id + ": " + line + "\n")) })
		p := startProc(t, r.bin, envFor(id), instLogs, "serve")
		var addr string
		select {
		case addr = <-addrs:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s never logged its HTTP address", id)
		}
		e2etest.Eventually(t, 30*time.Second, id+" ready", func() bool {
			return e2etest.HTTPStatus("http://"+addr+"/readyz") == http.StatusOK
		})
		e2etest.Eventually(t, 30*time.Second, fmt.Sprintf("%d members in the group", members), func() bool {
			return groupMembers(k.Brokers(), group) == members
		})
		return p
	}
	ids := []string{"inst-a", "inst-b", "inst-c"}
	procs := map[string]*testenv.Process{}
	for n, id := range ids {
		procs[id] = start(id, n+1)
	}

	store := r.store(t)
	held := watchHold(t, store)

	begin := time.Now()
	rollFrom := begin.Add(3 * time.Second)
	// Silences from a little before the first SIGTERM to the end of the
	// last step (three steps of a few seconds each).
	f := r.startFleet(t, rng, "roll-", rollFrom.Add(-time.Second), rollFrom.Add(12*time.Second))
	time.Sleep(time.Until(rollFrom))

	type step struct {
		id         string
		from, to   time.Time
		left       time.Duration // SIGTERM → the group without the member
		exited     time.Duration // SIGTERM → process gone
		maxHold    time.Duration
		lateMax    time.Duration
		inside     int
		lateValues []time.Duration
	}
	var steps []*step
	for _, id := range ids {
		s := &step{id: id, from: time.Now()}
		done := make(chan int, 1)
		go func() { code, _ := procs[id].Stop(20 * time.Second); done <- code }()
		s.left = e2etest.Eventually(t, 2*session, id+" gone from the group", func() bool {
			return groupMembers(k.Brokers(), group) == len(ids)-1
		})
		if code := <-done; code != 0 {
			t.Errorf("%s exited with %d on SIGTERM, want 0", id, code)
		}
		s.exited = time.Since(s.from)
		procs[id] = start(id, len(ids))
		time.Sleep(2 * time.Second)
		s.to = time.Now()
		steps = append(steps, s)
	}
	rollTo := time.Now()

	e2etest.Eventually(t, 30*time.Second, "a timeout for every silent device", r.allFired)
	time.Sleep(2 * time.Second) // late duplicates or false timeouts would show here
	hold := held()
	for _, id := range ids {
		if code, _ := procs[id].Stop(20 * time.Second); code != 0 {
			t.Errorf("%s exited with %d on SIGTERM, want 0", id, code)
		}
	}
	f.Stop()
	v := r.verdict(t)

	// Lateness per step, by deadline.
	got := r.events.ByDevice()
	var inside []time.Duration
	for _, id := range f.SilentIDs() {
		evs := got[id]
		if len(evs) == 0 {
			continue
		}
		deadline := time.UnixMilli(evs[0].Ev.DeadlineMs)
		late := evs[0].At.Sub(deadline)
		for _, s := range steps {
			if !deadline.Before(s.from) && deadline.Before(s.to) {
				s.lateValues = append(s.lateValues, late)
			}
		}
		if !deadline.Before(rollFrom) && deadline.Before(rollTo) {
			inside = append(inside, late)
		}
	}
	for _, s := range steps {
		s.maxHold = hold.max(s.from, s.to)
		s.inside = len(s.lateValues)
		slices.Sort(s.lateValues)
		s.lateMax = e2etest.Percentile(s.lateValues, 1)
		t.Logf("step %s: left the group %v after SIGTERM, exited after %v; firing held at most %v; %d silences due, latest %v late",
			s.id, s.left.Round(time.Millisecond), s.exited.Round(time.Millisecond), s.maxHold.Round(time.Millisecond),
			s.inside, s.lateMax.Round(time.Millisecond))
		if s.left > session/2 {
			t.Errorf("%s stayed in the group %v after SIGTERM: it did not leave (session timeout %v)", s.id, s.left, session)
		}
	}
	if len(inside) == 0 {
		t.Fatal("no silence fell into the restarts: the test proves nothing")
	}
	t.Logf("rolling restart of 3 instances: %d silences inside, lateness %s; %v", len(inside), e2etest.Spread(inside), v)
}

// groupMembers counts group's members (-1 when it cannot be described).
func groupMembers(brokers []string, group string) int {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	resp, err := c.DescribeGroups(context.Background(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].Error != nil {
		return -1
	}
	return len(resp.Groups[0].Members)
}

// holdLog is what watchHold saw: the firing watermark's lag behind the
// clock, sampled every 10 ms.
type holdLog struct {
	at  []time.Time
	lag []time.Duration
}

// max is the longest lag sampled within [from, to].
func (h holdLog) max(from, to time.Time) time.Duration {
	var m time.Duration
	for k, at := range h.at {
		if !at.Before(from) && !at.After(to) {
			m = max(m, h.lag[k])
		}
	}
	return m
}

// watchHold samples min over partitions of wm(p) from Redis every 10 ms
// until the returned function is called, which returns the samples.
func watchHold(t *testing.T, store *shard.Store) func() holdLog {
	var (
		mu sync.Mutex
		h  holdLog
	)
	stopPoll := pollEvery(t, 10*time.Millisecond, func(ctx context.Context) {
		wms, n, err := store.Watermarks(ctx)
		if err != nil {
			return
		}
		min, ok := shard.MinWatermark(wms, n)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		h.at = append(h.at, now)
		h.lag = append(h.lag, now.Sub(time.UnixMilli(min)))
		mu.Unlock()
	})
	return func() holdLog {
		stopPoll()
		mu.Lock()
		defer mu.Unlock()
		return h
	}
}
