package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// WaitResult is scenario 1's exact ingest against a primary with one
// replica, without and with redis.wait_replicas: what confirming every
// batch on a replica (WAIT; docs/operations.md, "Durability across failover") costs.
type WaitResult struct {
	Devices    int        `json:"devices"`
	Heartbeats int        `json:"heartbeats"`
	NoWait     *IngestRun `json:"wait_replicas_0"`
	Wait       *IngestRun `json:"wait_replicas_1"`
	// Ratio is the heartbeats/s (from start) of wait_replicas 1 over 0.
	Ratio float64 `json:"ratio_wait_to_no_wait"`
}

func runWait(ctx context.Context, o *options) (*WaitResult, error) {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	kc, brokers, rp, st := infra.kc, infra.brokers, infra.rp, infra.st
	replica, err := startRedis()
	if err != nil {
		return nil, err
	}
	defer replica.Close()
	if err := replicate(ctx, replica, rp); err != nil {
		return nil, err
	}
	rounds := max(1, o.ingestHeartbeats/o.ingestDevices)
	res := &WaitResult{Devices: o.ingestDevices, Heartbeats: rounds * o.ingestDevices}
	ids := sample.DeviceIDs("dev-", o.ingestDevices)
	status("wait: preloading %d heartbeats of %d devices into %s (%d partitions)", res.Heartbeats, res.Devices, kc.SignalsTopic, o.partitions)
	ends, err := preload(ctx, brokers, kc.SignalsTopic, ids, rounds, time.Now().Add(-time.Duration(rounds)*time.Second), time.Second)
	if err != nil {
		return nil, err
	}
	for _, n := range []int{0, 1} {
		if err := rp.rdb.FlushAll(ctx).Err(); err != nil {
			return nil, err
		}
		run, err := ingestOnce(ctx, o, brokers, rp, st, ends, res.Heartbeats, fmt.Sprintf("wait_replicas=%d", n),
			map[string]string{"redis.wait_replicas": fmt.Sprint(n)})
		if err != nil {
			return nil, err
		}
		if !run.Completed {
			return nil, fmt.Errorf("wait_replicas %d: not caught up within %s", n, o.ingestTimeout)
		}
		status("wait: wait_replicas %d: %.0f heartbeats/s from start", n, run.HeartbeatsPerSecond)
		if n == 0 {
			res.NoWait = run
		} else {
			res.Wait = run
		}
	}
	res.Ratio = res.Wait.HeartbeatsPerSecond / res.NoWait.HeartbeatsPerSecond
	return res, nil
}

// replicate makes replica a replica of primary and waits for its first
// sync to finish.
func replicate(ctx context.Context, replica, primary *redisProc) error {
	host, port, err := net.SplitHostPort(primary.Addr)
	if err != nil {
		return err
	}
	if err := replica.rdb.Do(ctx, "replicaof", host, port).Err(); err != nil {
		return fmt.Errorf("replicaof: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := replica.rdb.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s: link to %s not up within 30s", replica.Addr, primary.Addr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
