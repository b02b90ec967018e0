package scanner_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
)

// instance is one flatline instance's scanning side over a shared Redis:
// its own client and store, a scanner and its wake-ups, running until the
// test ends. Its store announces soon deadlines as app wires it.
type instance struct {
	store   *shard.Store
	scanner *scanner.Scanner
	wakes   *scanner.Wakes
}

// startInstance starts an instance over rdb with key prefix; firing is not
// held back by the watermark. It scans nothing until the test calls
// SetShards, and returns once its wakes subscription is confirmed. The ids
// of the members it fires arrive on its fired channel.
func startInstance(t *testing.T, rdb redis.UniversalClient, prefix string, cfg scanner.Config, shards int) *instance {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	log := slog.New(slog.DiscardHandler)
	// The store announces its writes' soon deadlines to the wakes built
	// below, once the scanner it wakes exists.
	var wakes *scanner.Wakes
	store := shard.New(rdb, shard.Options{Keys: shard.NewKeys(prefix),
		Wakes: shard.Wakes{Within: cfg.WakeWithin(), Announce: func(shards []int) { wakes.Announce(shards) }}})
	if err := store.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.RaiseWatermarks(ctx, 1, map[int]int64{0: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	gate := scanner.NewGate(scanner.GateOptions{Store: store, Poll: time.Hour, StallAfter: time.Hour, Log: log})
	if err := gate.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := scanner.New(cfg, scanner.Options{
		Store: store, Dispatcher: &countingDispatcher{}, Gate: gate, Layout: fixedLayout{shard.Layout{Count: shards}},
		Metrics: metrics.New(metrics.Options{}), Log: log, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	sc.TestSignals.Init(t)
	wakes = scanner.NewWakes(scanner.WakesOptions{Store: store, Scanner: sc, Log: log})
	wakes.TestSignals.Init(t)
	runCtx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { _ = sc.Run(runCtx) })
	running.Go(func() { _ = wakes.Run(runCtx) })
	t.Cleanup(func() {
		stop()
		running.Wait()
	})
	select {
	case <-wakes.TestSignals.Subscribed.C():
	case <-ctx.Done():
		t.Fatal("the wakes subscription was not confirmed")
	}
	return &instance{store: store, scanner: sc, wakes: wakes}
}

// wakeTest is what each test here starts from: a Redis, a key prefix for
// its instances, a context bounding the test, and the scanner's default
// configuration polling every interval.
func wakeTest(t *testing.T, interval time.Duration) (*testenv.RedisServer, string, context.Context, scanner.Config) {
	t.Helper()
	cfg := scanner.DefaultConfig()
	cfg.Interval = interval
	return testenv.Redis(t), testenv.Prefix(t), testenv.Context(t, 30*time.Second), cfg
}

func waitFired(ctx context.Context, t *testing.T, fired <-chan string, id, why string) {
	t.Helper()
	for {
		select {
		case got := <-fired:
			if got == id {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%s did not fire: %s", id, why)
		}
	}
}

// A write whose deadline falls due before the next poll wakes the shard's
// scanner on the instance that scans it, whichever instance wrote it: here
// the poll is a minute away, longer than the test may run, so the deadline
// fires only because the write woke the scanner. Each instance's scanner
// first fires a member that was due at its start: once it has, its start-up
// passes are over and it is idle (an empty shard, no timer), so nothing but
// a wake-up makes it read its shard again.
func TestSoonDeadlineWakesTheScannerOfItsShard(t *testing.T) {
	t.Parallel()
	srv, prefix, ctx, cfg := wakeTest(t, time.Minute)
	a := startInstance(t, srv.Client(t), prefix, cfg, 2)
	b := startInstance(t, srv.Client(t), prefix, cfg, 2)
	firedA, firedB := a.scanner.TestSignals.Fired.C(), b.scanner.TestSignals.Fired.C()
	keys := shard.NewKeys(prefix)
	due := shard.Score(time.Now().Add(-time.Second).UnixMilli(), 0)
	for i, id := range []string{"started-0", "started-1"} {
		if err := srv.Client(t).ZAdd(ctx, keys.Deadlines(i), redis.Z{Member: id, Score: due}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.scanner.SetShards([]int{0}); err != nil {
		t.Fatal(err)
	}
	if err := b.scanner.SetShards([]int{1}); err != nil {
		t.Fatal(err)
	}
	waitFired(ctx, t, firedA, "started-0", "instance A's start-up pass")
	waitFired(ctx, t, firedB, "started-1", "instance B's start-up pass")

	write := func(in *instance, i int, id string) {
		t.Helper()
		var batch shard.Batch
		batch.Reset(2)
		batch.Add(i, id, shard.Score(time.Now().Add(300*time.Millisecond).UnixMilli(), 0), 0)
		if _, err := in.store.Write(ctx, &batch); err != nil {
			t.Fatal(err)
		}
	}
	// B writes into A's shard: the wake-up goes through Redis.
	write(b, 0, "elsewhere")
	waitFired(ctx, t, firedA, "elsewhere", "a write on another instance did not wake the shard's scanner")
	// B writes into its own shard: the wake-up stays in the process.
	write(b, 1, "here")
	waitFired(ctx, t, firedB, "here", "a write did not wake this instance's scanner of the shard")
}

// commandCounter counts, per key, the ZRANGEs a client sent on their own
// (a pass's reads) and in pipelines (the poll's), and signals each poll: a
// pipeline of ZRANGEs only.
type commandCounter struct {
	mu     sync.Mutex
	passes map[string]int
	polled map[string]int
	polls  int
	poll   chan struct{}
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "zrange" {
			c.mu.Lock()
			c.passes[cmd.Args()[1].(string)]++
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		poll := len(cmds) > 0
		for _, cmd := range cmds {
			poll = poll && cmd.Name() == "zrange"
		}
		if poll {
			c.mu.Lock()
			c.polls++
			for _, cmd := range cmds {
				c.polled[cmd.Args()[1].(string)]++
			}
			c.mu.Unlock()
			select {
			case c.poll <- struct{}{}:
			default:
			}
		}
		return next(ctx, cmds)
	}
}

func (c *commandCounter) snapshot(key string) (passes, polled, polls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passes[key], c.polled[key], c.polls
}

// An idle shard costs its scanner one command per poll, sent with every
// other shard's in one round trip, and no pass of its own: neither the
// poll nor anything else wakes a shard whose next deadline is far away.
// Counted by the polls the client sent, not by the clock.
func TestIdleShardCostsOneCommandPerPoll(t *testing.T) {
	t.Parallel()
	srv, prefix, ctx, cfg := wakeTest(t, 20*time.Millisecond)
	count := &commandCounter{passes: map[string]int{}, polled: map[string]int{}, poll: make(chan struct{}, 1)}
	rdb := srv.Client(t)
	rdb.AddHook(count)
	in := startInstance(t, rdb, prefix, cfg, 2)
	keys := shard.NewKeys(prefix)
	// Shard 0 holds a deadline an hour away, shard 1 nothing.
	if err := rdb.ZAdd(ctx, keys.Deadlines(0), redis.Z{Member: "later", Score: shard.Score(time.Now().Add(time.Hour).UnixMilli(), 0)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := in.scanner.SetShards([]int{0, 1}); err != nil {
		t.Fatal(err)
	}
	waitPolls := func(n int) {
		t.Helper()
		for {
			if _, _, polls := count.snapshot(keys.Deadlines(0)); polls >= n {
				return
			}
			select {
			case <-count.poll:
			case <-ctx.Done():
				t.Fatalf("fewer than %d polls", n)
			}
		}
	}
	// The start-up passes: one read of each shard (checked at each poll).
	for _, i := range []int{0, 1} {
		for {
			if passes, _, _ := count.snapshot(keys.Deadlines(i)); passes >= 1 {
				break
			}
			select {
			case <-count.poll:
			case <-ctx.Done():
				t.Fatalf("shard %d never passed", i)
			}
		}
	}
	_, _, polls := count.snapshot(keys.Deadlines(0))
	waitPolls(polls + 1) // a poll that began after the start-up passes
	const window = 10
	for _, i := range []int{0, 1} {
		key := keys.Deadlines(i)
		passes0, polled0, polls0 := count.snapshot(key)
		waitPolls(polls0 + window)
		passes, polled, polls := count.snapshot(key)
		if passes != passes0 {
			t.Errorf("shard %d: %d passes read it during %d polls, want none", i, passes-passes0, polls-polls0)
		}
		if polled-polled0 != polls-polls0 {
			t.Errorf("shard %d: read %d times by %d polls, want once per poll", i, polled-polled0, polls-polls0)
		}
	}
}

// The poll reads the shards a slice at a time, one round trip per slice,
// so that many shards are not one burst of commands an interval: here an
// interval of three poll steps reads six shards in three slices, each
// slice's ids congruent modulo three, every shard once an interval.
func TestPollReadsTheShardsASliceAtATime(t *testing.T) {
	t.Parallel()
	srv, prefix, ctx, cfg := wakeTest(t, 300*time.Millisecond)
	rec := &pollRecorder{poll: make(chan []string, 100)}
	rdb := srv.Client(t)
	rdb.AddHook(rec)
	in := startInstance(t, rdb, prefix, cfg, 8)
	if err := in.scanner.SetShards([]int{0, 1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	keys := shard.NewKeys(prefix)
	idOf := make(map[string]int)
	for i := range 6 {
		idOf[keys.Deadlines(i)] = i
	}
	// Three consecutive polls after the first: one slice each, together
	// every shard once.
	next := func() []int {
		t.Helper()
		select {
		case ks := <-rec.poll:
			ids := make([]int, 0, len(ks))
			for _, k := range ks {
				ids = append(ids, idOf[k])
			}
			return ids
		case <-ctx.Done():
			t.Fatal("no poll")
			return nil
		}
	}
	next()
	seen := make(map[int]int)
	for range 3 {
		ids := next()
		if len(ids) != 2 || ids[0]%3 != ids[1]%3 {
			t.Fatalf("a poll read shards %v, want one slice: two shards with ids congruent modulo 3", ids)
		}
		for _, id := range ids {
			seen[id]++
		}
	}
	for i := range 6 {
		if seen[i] != 1 {
			t.Errorf("shard %d read %d times by three polls, want once", i, seen[i])
		}
	}
}

// pollRecorder sends the keys of every poll (a pipeline of ZRANGEs only) a
// client sends.
type pollRecorder struct{ poll chan []string }

func (r *pollRecorder) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (r *pollRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (r *pollRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		keys := make([]string, 0, len(cmds))
		for _, cmd := range cmds {
			if cmd.Name() != "zrange" {
				return next(ctx, cmds)
			}
			keys = append(keys, cmd.Args()[1].(string))
		}
		if len(keys) > 0 {
			select {
			case r.poll <- keys:
			default:
			}
		}
		return next(ctx, cmds)
	}
}

// Announcements published while a subscription is down are lost: once
// go-redis has subscribed again, every shard of the instance passes, and
// finds what it was not told about. Here the deadline is written without an
// announcement (as if its announcement was lost) and the instance's
// subscription connection is killed; the poll is a minute away.
func TestResubscribedInstancePassesEveryShard(t *testing.T) {
	t.Parallel()
	srv, prefix, ctx, cfg := wakeTest(t, time.Minute)
	in := startInstance(t, srv.Client(t), prefix, cfg, 1)
	fired := in.scanner.TestSignals.Fired.C()
	rdb := srv.Client(t)
	deadlines := shard.NewKeys(prefix).Deadlines(0)
	if err := rdb.ZAdd(ctx, deadlines, redis.Z{Member: "started", Score: shard.Score(time.Now().Add(-time.Second).UnixMilli(), 0)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := in.scanner.SetShards([]int{0}); err != nil {
		t.Fatal(err)
	}
	waitFired(ctx, t, fired, "started", "the start-up pass")

	if err := rdb.ZAdd(ctx, deadlines, redis.Z{Member: "unannounced", Score: shard.Score(time.Now().Add(300*time.Millisecond).UnixMilli(), 0)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "client", "kill", "type", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.wakes.TestSignals.Subscribed.C():
	case <-ctx.Done():
		t.Fatal("go-redis did not subscribe again")
	}
	waitFired(ctx, t, fired, "unannounced", "the shards did not pass after the subscription came back")
}

// The gate reads the other instances' watermarks every poll only while a
// deadline waits for the watermark; with none waiting it idles (here an
// hour). A deadline the watermark holds back makes it poll, so another
// instance's raise in Redis fires it; once it fired, the gate idles again.
func TestGatePollsOnlyWhileADeadlineWaits(t *testing.T) {
	t.Parallel()
	store, rdb := newStore(t)
	ctx := testenv.Context(t, 30*time.Second)
	log := slog.New(slog.DiscardHandler)
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: t0, 1: t0}); err != nil {
		t.Fatal(err)
	}
	gate := scanner.NewGate(scanner.GateOptions{Store: store, Poll: 5 * time.Millisecond, IdlePoll: time.Hour, StallAfter: time.Hour, Log: log})
	advanced := make(chan int64, 100)
	gate.OnAdvance(func(wm int64) { advanced <- wm })
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	running.Go(func() { _ = gate.Run(runCtx) })
	if wm := <-advanced; wm != t0 {
		t.Fatalf("first read: watermark %d, want %d", wm, t0)
	}
	// Another instance raises its partitions. Nothing waits: no read.
	quiet := func(what string) {
		t.Helper()
		select {
		case wm := <-advanced:
			t.Fatalf("%s: the gate read the raise to %d with no deadline waiting", what, wm)
		case <-time.After(300 * time.Millisecond):
		}
	}
	t1 := time.Now().Add(-30 * time.Second).UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: t1, 1: t1}); err != nil {
		t.Fatal(err)
	}
	quiet("before any deadline")

	// A deadline due by the clock, past the watermark the gate last read
	// (t0) and the one in Redis (t1): the scanner holds it and the gate
	// polls until a raise passes it.
	cfg := scanner.DefaultConfig()
	cfg.Interval = time.Hour // no safety-net poll wakes the shard: only the gate's reads can
	sc, err := scanner.New(cfg, scanner.Options{
		Store: store, Dispatcher: &countingDispatcher{}, Gate: gate, Layout: fixedLayout{shard.Layout{Count: 1}},
		Metrics: metrics.New(metrics.Options{}), Log: log, DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	sc.TestSignals.Init(t)
	fired := sc.TestSignals.Fired.C()
	deadline := time.Now().Add(-10 * time.Second).UnixMilli()
	keys := store.Keys()
	if err := rdb.ZAdd(ctx, keys.Deadlines(0), redis.Z{Member: "held", Score: shard.Score(deadline, 0)}).Err(); err != nil {
		t.Fatal(err)
	}
	running.Go(func() { _ = sc.Run(runCtx) })
	if err := sc.SetShards([]int{0}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-fired:
		t.Fatalf("%s fired with the watermark at %d, before its deadline %d", id, t1, deadline)
	case <-time.After(300 * time.Millisecond):
	}
	now := time.Now().UnixMilli()
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: now, 1: now}); err != nil {
		t.Fatal(err)
	}
	waitFired(ctx, t, fired, "held", "another instance's raise past a waiting deadline did not reach the gate")

	// Nothing waits any more: the gate idles again.
	for len(advanced) > 0 {
		<-advanced
	}
	time.Sleep(50 * time.Millisecond) // a read begun before the fire may still be in flight
	for len(advanced) > 0 {
		<-advanced
	}
	later := time.Now().UnixMilli() + 1
	if err := store.RaiseWatermarks(ctx, 2, map[int]int64{0: later, 1: later}); err != nil {
		t.Fatal(err)
	}
	quiet("after the deadline fired")
}
