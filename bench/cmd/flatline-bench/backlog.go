package main

import (
	"context"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// backlog is the exact-ingest scenarios' fleet in the signals topic: every
// one of o.ingestDevices devices beating every second for the last rounds
// seconds before base.
type backlog struct {
	ids        []string
	rounds     int
	heartbeats int
	base       time.Time
	// ends are the partitions' end offsets once the backlog is written.
	ends map[int]int64
}

// preloadBacklog writes the ingest fleet's backlog into the signals topic,
// logging it under the scenario's name.
func (in *scenarioInfra) preloadBacklog(ctx context.Context, o *options, scenario string) (*backlog, error) {
	rounds := max(1, o.ingestHeartbeats/o.ingestDevices)
	b := &backlog{ids: sample.DeviceIDs("dev-", o.ingestDevices), rounds: rounds, heartbeats: rounds * o.ingestDevices}
	status("%s: preloading %d heartbeats of %d devices into %s (%d partitions)", scenario, b.heartbeats, o.ingestDevices, in.kc.SignalsTopic, o.partitions)
	b.base = time.Now().Add(-time.Duration(rounds) * time.Second)
	var err error
	b.ends, err = preload(ctx, in.brokers, in.kc.SignalsTopic, b.ids, rounds, b.base, time.Second)
	return b, err
}

// ingestBacklog empties Redis, lets prepare (when not nil) write what the
// run starts with, and runs one exact ingest of the backlog (ingestOnce)
// named mode, with settings on top.
func (in *scenarioInfra) ingestBacklog(ctx context.Context, o *options, b *backlog, mode string, settings map[string]string, prepare func() error) (*IngestRun, error) {
	if err := in.rp.rdb.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return nil, err
		}
	}
	return ingestOnce(ctx, o, in.brokers, in.rp, in.st, b.ends, b.heartbeats, mode, settings)
}
