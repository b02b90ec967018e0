package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// soak runs the whole soak and returns its result; an error is a soak that
// could not run to its end (the result, when not nil, says how far it got).
//
// Stop order: the observers (probes, sampler, churn, the plan) first; then
// the instances, together, while the fleet still beats (a fleet stopping
// first would make every device time out); then the fleet; then the
// reader, once it has read everything the timeouts topic holds; then
// Redis and Kafka.
func soak(ctx context.Context, o options) (*Result, error) {
	halving, err := offersHalving(ctx, o.flatline)
	if err != nil {
		return nil, err
	}
	in, err := startInfra(ctx, o.partitions)
	if err != nil {
		return nil, err
	}
	defer in.close()
	k := in.topics.Kafka
	settings := map[string]string{
		"redis.addrs":          in.redisAddr,
		"kafka.brokers":        strings.Join(in.brokers, ","),
		"log.level":            "warn",
		"timeouts.default":     o.timeout.String(),
		"shards.initial_count": fmt.Sprint(o.shards),
	}
	sl := newSlots()
	p := &plan{o: o, in: in, slots: sl, settings: settings, addrs: map[string]string{}, gens: map[string]int{}, halving: halving}

	rd, err := newReader(in.brokers, k.TimeoutsTopic, o.partitions)
	if err != nil {
		return nil, err
	}
	defer rd.close()
	readCtx, stopReader := context.WithCancel(context.Background())
	defer stopReader()
	readDone := make(chan error, 1)
	go func() { readDone <- rd.Run(readCtx) }()

	for _, slot := range []string{"a", "b"} {
		inst, err := p.start(ctx, slot)
		if err != nil {
			stopAll(sl, o.restartTimeout)
			return nil, err
		}
		status("%s ready (pid %d, http %s) after %.1fs", inst.id, inst.pid, inst.httpAddr, inst.ready.Sub(inst.started).Seconds())
	}

	f, err := newFleet(in.brokers, k.SignalsTopic, o.devices, o.interval)
	if err != nil {
		stopAll(sl, o.restartTimeout)
		return nil, err
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- f.Run(loadCtx) }()

	t0 := time.Now()
	p.t0 = t0
	end := t0.Add(o.duration)
	status("soak: %s of %d devices beating every %s (timeout %s), %d partitions, %d shards; disturbances in the first half",
		o.duration, o.devices, o.interval, o.timeout, o.partitions, o.shards)

	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	obs, obsCtx := errgroup.WithContext(obsCtx)
	probers := map[string]*prober{}
	var probersMu sync.Mutex
	// The probes of a slot run under obs's context; stop waits for them.
	p.probe = func(slot, addr string) func() {
		pr := newProber(addr)
		probersMu.Lock()
		probers[slot] = pr
		probersMu.Unlock()
		pctx, cancel := context.WithCancel(obsCtx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = pr.Run(pctx)
		}()
		return func() { cancel(); <-done }
	}
	var stopProbes []func()
	for _, slot := range []string{"a", "b"} {
		stopProbes = append(stopProbes, p.probe(slot, p.addrs[slot]))
	}
	smp := &sampler{in: in, slots: sl, t0: t0, period: o.sampleEvery}
	obs.Go(func() error { return smp.Run(obsCtx) })
	obs.Go(func() error { return in.trimSignals(obsCtx) })
	ch := &churn{f: f, every: o.churnEvery, until: end.Add(-o.quietEnd), joinN: o.joinN, leaveN: o.leaveN, silenceN: o.silenceN}
	obs.Go(func() error { return ch.Run(obsCtx) })
	obs.Go(func() error { return p.Run(obsCtx) })
	obs.Go(func() error {
		select {
		case <-obsCtx.Done():
			return nil
		case <-time.After(time.Until(end)):
			return errRunEnded
		}
	})
	runErr := obs.Wait()
	for _, stop := range stopProbes {
		stop()
	}
	if errors.Is(runErr, errRunEnded) {
		runErr = nil
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = fmt.Errorf("interrupted after %s", time.Since(t0).Round(time.Second))
	}
	ended := time.Now()
	status("soak: stopping the instances")
	p.stopEnd(sl)
	stopLoad()
	if err := <-fleetDone; err != nil && runErr == nil {
		runErr = fmt.Errorf("fleet: %w", err)
	}
	status("soak: reading the rest of the timeouts topic")
	if err := rd.caughtUp(context.Background(), 30*time.Second); err != nil && runErr == nil {
		runErr = err
	}
	stopReader()
	<-readDone

	res := newResult(o, p, f, rd, smp, probers, t0, ended)
	return res, runErr
}

// errRunEnded ends the observers' group when the soak's time is up.
var errRunEnded = errors.New("the soak's duration has passed")

// stopEnd SIGTERMs every running instance at once and records the exits.
func (p *plan) stopEnd(sl *slots) {
	var wg sync.WaitGroup
	for _, inst := range sl.current() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := p.stop(inst.slot)
			status("%s exit %d %s", e.ID, e.Code, e.Error)
		}()
	}
	wg.Wait()
}

// stopAll stops what started before the soak could begin.
func stopAll(sl *slots, timeout time.Duration) {
	for _, inst := range sl.current() {
		_, _ = inst.stop(timeout)
	}
}
