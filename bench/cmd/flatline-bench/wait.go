package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
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
	replica, err := startRedis()
	if err != nil {
		return nil, err
	}
	defer replica.Close()
	if err := replicate(ctx, replica, infra.rp); err != nil {
		return nil, err
	}
	b, err := infra.preloadBacklog(ctx, o, "wait")
	if err != nil {
		return nil, err
	}
	res := &WaitResult{Devices: o.ingestDevices, Heartbeats: b.heartbeats}
	for _, n := range []int{0, 1} {
		run, err := infra.ingestBacklog(ctx, o, b, fmt.Sprintf("wait_replicas=%d", n),
			map[string]string{"redis.wait_replicas": fmt.Sprint(n)}, nil)
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
