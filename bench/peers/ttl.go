package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

const ttlSystem = "Redis TTL keys + keyspace notifications"

// sparseWait is how long after the last sparse deadline the tests wait for
// stragglers.
const sparseWait = 10 * time.Second

// ttlDetails is the TTL peer's JSON detail.
type ttlDetails struct {
	Keys            int         `json:"reset_keys"`
	ResetsPerSecond float64     `json:"resets_per_second"`
	ResetPipeline   int         `json:"reset_pipeline"`
	ResetConns      int         `json:"reset_connections"`
	Population      int         `json:"sparse_population"`
	Sparse          sample.Dist `json:"sparse"`
	SparseWanted    int         `json:"sparse_wanted"`
	MassKeys        int         `json:"mass_keys"`
	MassReceived    int         `json:"mass_received"`
	MassFirstS      float64     `json:"mass_first_after_deadline_seconds"`
	MassLastS       float64     `json:"mass_last_after_deadline_seconds"`
	MassPerSecond   float64     `json:"mass_events_per_second"`
	MassSubErr      string      `json:"mass_subscriber_error,omitempty"`
	MassLoadEndS    float64     `json:"mass_load_end_before_deadline_seconds"`
	LossSent        int         `json:"loss_keys"`
	LossReceived    int         `json:"loss_received"`
	Hz              string      `json:"redis_hz"`
}

func runTTL(ctx context.Context, o *options) ([]Row, *ttlDetails, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.redis, PoolSize: 16})
	defer rdb.Close()
	d := &ttlDetails{Keys: o.ttlKeys, ResetPipeline: 4096, ResetConns: 4, Population: o.ttlPopulate,
		SparseWanted: o.sparse, MassKeys: o.massTTL}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, d, err
	}
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
		return nil, d, err
	}
	if v, err := rdb.ConfigGet(ctx, "hz").Result(); err == nil {
		d.Hz = v["hz"]
	}
	var rows []Row

	// Resets: SET key PXAT, pipelined, from several connections.
	status("ttl: resets of %d keys for %s", o.ttlKeys, o.resetFor)
	ids := sample.DeviceIDs("dev-", o.ttlKeys)
	if _, err := setPXAT(ctx, rdb, ids, func(int) int64 { return time.Now().Add(time.Hour).UnixMilli() }); err != nil {
		return nil, d, err
	}
	d.ResetsPerSecond = ttlResets(ctx, rdb, ids, o.resetFor, d.ResetConns, d.ResetPipeline)
	rows = append(rows, Row{System: ttlSystem, Metric: fmt.Sprintf("resets/s (SET PXAT, %d-deep pipelines, %d conns)", d.ResetPipeline, d.ResetConns), Value: d.ResetsPerSecond, Unit: "/s"})

	// Sparse: a few deadlines among many live keys.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return rows, d, err
	}
	status("ttl: %d live keys, %d deadlines over %s", o.ttlPopulate, o.sparse, o.spread)
	pop := sample.DeviceIDs("live-", o.ttlPopulate)
	popDur, err := setPXAT(ctx, rdb, pop, func(int) int64 { return time.Now().Add(time.Hour).UnixMilli() })
	if err != nil {
		return rows, d, err
	}
	loadRate := float64(len(pop)) / popDur.Seconds()
	probes := sample.DeviceIDs("probe-", o.sparse)
	first := time.Now().Add(time.Second).UnixMilli()
	deadlineOf := func(k int) int64 { return first + int64(k)*o.spread.Milliseconds()/int64(len(probes)) }
	byID := map[string]int64{}
	for k, id := range probes {
		byID[id] = deadlineOf(k)
	}
	var mu sync.Mutex
	var late []float64
	seen := map[string]bool{}
	sub, err := subscribeExpired(ctx, rdb, func(key string, at time.Time) {
		dl, ok := byID[key]
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[key] {
			seen[key] = true
			late = append(late, float64(at.UnixMicro())/1e3-float64(dl))
		}
	})
	if err != nil {
		return rows, d, err
	}
	if _, err := setPXAT(ctx, rdb, probes, deadlineOf); err != nil {
		return rows, d, err
	}
	waitUntil(time.UnixMilli(first).Add(o.spread+sparseWait), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(late) >= len(probes)
	})
	sub.Close()
	mu.Lock()
	d.Sparse = sample.DistOf(late)
	mu.Unlock()
	rows = append(rows, latencyRows(ttlSystem, fmt.Sprintf("sparse: %d deadlines among %s live keys", o.sparse, fmtInt(o.ttlPopulate)), d.Sparse, o.sparse, "Redis default hz "+d.Hz)...)

	// Mass expiry.
	if o.massTTL > 0 {
		massRows, err := ttlMass(ctx, rdb, o, d, loadRate)
		rows = append(rows, massRows...)
		if err != nil {
			return rows, d, err
		}
	}

	// Loss: the subscriber is away for o.gap in the middle of a stream.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return rows, d, err
	}
	const lossKeys, lossWindow = 1000, 4 * time.Second
	status("ttl: %d expiries over %s, subscriber away for %s", lossKeys, lossWindow, o.gap)
	lids := sample.DeviceIDs("loss-", lossKeys)
	lfirst := time.Now().Add(time.Second)
	var lgot atomic.Int64
	count := func(string, time.Time) { lgot.Add(1) }
	lsub, err := subscribeExpired(ctx, rdb, count)
	if err != nil {
		return rows, d, err
	}
	if _, err := setPXAT(ctx, rdb, lids, func(k int) int64 {
		return lfirst.UnixMilli() + int64(k)*lossWindow.Milliseconds()/lossKeys
	}); err != nil {
		return rows, d, err
	}
	away := lfirst.Add((lossWindow - o.gap) / 2)
	time.Sleep(time.Until(away))
	lsub.Close()
	time.Sleep(o.gap)
	lsub, err = subscribeExpired(ctx, rdb, count)
	if err != nil {
		return rows, d, err
	}
	time.Sleep(time.Until(lfirst.Add(lossWindow + 2*time.Second)))
	lsub.Close()
	d.LossSent, d.LossReceived = lossKeys, int(lgot.Load())
	rows = append(rows, Row{System: ttlSystem, Metric: fmt.Sprintf("events lost while the subscriber is away %s (of %d over %s)", o.gap, lossKeys, lossWindow),
		Value: float64(lossKeys - d.LossReceived), Unit: "events", Note: "pub/sub keeps nothing for an absent subscriber"})
	return rows, d, nil
}

// ttlMass sets o.massTTL keys to expire at one moment, far enough ahead
// for keys loaded at loadRate per second, and counts the expired-key
// notifications from the deadline to the last one.
func ttlMass(ctx context.Context, rdb *redis.Client, o *options, d *ttlDetails, loadRate float64) ([]Row, error) {
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	mass := sample.DeviceIDs("m-", o.massTTL)
	margin := time.Second + time.Duration(1.5*float64(len(mass))/loadRate*float64(time.Second))
	deadline := time.Now().Add(margin)
	status("ttl: %d keys expiring at once (+%s)", len(mass), margin.Round(time.Millisecond))
	var got atomic.Int64
	var firstAt, lastAt atomic.Int64
	msub, err := subscribeExpired(ctx, rdb, func(_ string, at time.Time) {
		if got.Add(1) == 1 {
			firstAt.Store(at.UnixMicro())
		}
		lastAt.Store(at.UnixMicro())
	})
	if err != nil {
		return nil, err
	}
	if _, err := setPXAT(ctx, rdb, mass, func(int) int64 { return deadline.UnixMilli() }); err != nil {
		return nil, err
	}
	d.MassLoadEndS = time.Until(deadline).Seconds()
	waitUntil(deadline.Add(60*time.Second), func() bool { return got.Load() >= int64(len(mass)) || msub.Err() != nil })
	// Let the last notifications arrive after a subscriber error, if any.
	if msub.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	msub.Close()
	if e := msub.Err(); e != nil {
		d.MassSubErr = e.Error()
	}
	d.MassReceived = int(got.Load())
	if d.MassReceived > 0 {
		d.MassFirstS = float64(firstAt.Load()-deadline.UnixMicro()) / 1e6
		d.MassLastS = float64(lastAt.Load()-deadline.UnixMicro()) / 1e6
		d.MassPerSecond = float64(d.MassReceived) / d.MassLastS
	}
	note := ""
	if d.MassSubErr != "" {
		note = "subscriber dropped: " + d.MassSubErr
	}
	return []Row{
		{System: ttlSystem, Metric: fmt.Sprintf("mass: %s keys expiring at once, notifications received", fmtInt(len(mass))), Value: float64(d.MassReceived), Unit: "events", Note: note},
		{System: ttlSystem, Metric: "mass: deadline → last notification", Value: d.MassLastS, Unit: "s"},
		{System: ttlSystem, Metric: "mass: drain rate", Value: d.MassPerSecond, Unit: "events/s"},
	}, nil

}

// runTTLMass is -only ttl-mass: the mass expiry alone, on the server as
// given (flatline-bench starts a fresh one for each run), its load rate
// measured first on keys that are flushed again.
func runTTLMass(ctx context.Context, o *options) ([]Row, *ttlDetails, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.redis, PoolSize: 16})
	defer rdb.Close()
	d := &ttlDetails{MassKeys: o.massTTL}
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
		return nil, d, err
	}
	warm := sample.DeviceIDs("warm-", min(o.massTTL, 200_000))
	took, err := setPXAT(ctx, rdb, warm, func(int) int64 { return time.Now().Add(time.Hour).UnixMilli() })
	if err != nil {
		return nil, d, err
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return nil, d, err
	}
	rows, err := ttlMass(ctx, rdb, o, d, float64(len(warm))/took.Seconds())
	return rows, d, err
}

// setPXAT sets every id (value "1") to expire at deadlineOf(k), pipelined.
func setPXAT(ctx context.Context, rdb *redis.Client, ids []string, deadlineOf func(k int) int64) (time.Duration, error) {
	start := time.Now()
	const chunk = 4096
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var next atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(chunk)) - chunk
				if from >= len(ids) {
					return
				}
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for k := from; k < min(from+chunk, len(ids)); k++ {
						p.Do(ctx, "SET", ids[k], "1", "PXAT", deadlineOf(k))
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// ttlResets resets keys round-robin (SET PXAT an hour out) for dur and
// returns resets per second.
func ttlResets(ctx context.Context, rdb *redis.Client, ids []string, dur time.Duration, conns, depth int) float64 {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cursor := (w * len(ids) / conns)
			for ctx.Err() == nil {
				at := time.Now().Add(time.Hour).UnixMilli()
				_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
					for k := 0; k < depth; k++ {
						p.Do(ctx, "SET", ids[cursor], "1", "PXAT", at)
						cursor++
						if cursor == len(ids) {
							cursor = 0
						}
					}
					return nil
				})
				if err != nil {
					return
				}
				total.Add(int64(depth))
			}
		}(w)
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// expiredSub receives expired-key notifications.
type expiredSub struct {
	ps     *redis.PubSub
	done   chan struct{}
	closed atomic.Bool
	err    atomic.Value
}

func subscribeExpired(ctx context.Context, rdb *redis.Client, fn func(key string, at time.Time)) (*expiredSub, error) {
	ps := rdb.Subscribe(ctx, "__keyevent@0__:expired")
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, err
	}
	s := &expiredSub{ps: ps, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil {
				if !s.closed.Load() {
					s.err.Store(err)
				}
				return
			}
			fn(msg.Payload, time.Now())
		}
	}()
	return s, nil
}

// Err is the error that ended the subscription, if it ended other than by
// Close.
func (s *expiredSub) Err() error {
	select {
	case <-s.done:
		if e, ok := s.err.Load().(error); ok {
			return e
		}
	default:
	}
	return nil
}

func (s *expiredSub) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	s.closed.Store(true)
	_ = s.ps.Close()
	<-s.done
}

func waitUntil(end time.Time, done func() bool) {
	for time.Now().Before(end) && !done() {
		time.Sleep(20 * time.Millisecond)
	}
}

func fmtInt(n int) string {
	s := fmt.Sprint(n)
	out := ""
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out += ","
		}
		out += string(c)
	}
	return out
}
