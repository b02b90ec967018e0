package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

// GatewayCostResult is what gateways (SPEC §14) cost, each figure against
// the same work without parents in the same run:
//   - a dead gateway's children: gatewayChildren devices, all children of
//     one gateway due with it, against as many devices without a parent,
//     in turns; the children must come out unreachable, none a timeout;
//   - Redis bytes per child over a device without a parent;
//   - exact ingest of a fleet whose every heartbeat names a parent against
//     the same fleet without, in turns.
type GatewayCostResult struct {
	Children int `json:"children"`
	// Plain and Family are the drain rates (events/s from the shared
	// deadline) of the devices without and with a parent; FamilyFromParent
	// the children's from the gateway's timeout (or their first event, if
	// sooner): what draining them costs once they can be told unreachable.
	Plain            []float64 `json:"plain_events_per_second"`
	Family           []float64 `json:"children_events_per_second"`
	FamilyFromParent []float64 `json:"children_events_per_second_from_gateway_timeout"`
	// RatioDrain is median(FamilyFromParent) / median(Plain); RatioCPU the
	// median flatline CPU per million children over per million devices
	// without a parent.
	RatioDrain float64 `json:"ratio_drain"`
	RatioCPU   float64 `json:"ratio_cpu_per_event"`
	// Unreachable and ChildTimeouts are the children's events of the last
	// run by type; ChildrenHeld is its gateway's children_held.
	Unreachable   int   `json:"unreachable"`
	ChildTimeouts int   `json:"child_timeouts"`
	ChildrenHeld  int64 `json:"children_held"`
	// BytesPerChild is Redis's used memory per device with a parent less
	// per device without, ParentIDBytes the parent id's length.
	BytesPerChild float64 `json:"redis_bytes_per_child_over_plain"`
	ParentIDBytes int     `json:"parent_id_bytes"`
	// IngestParents and IngestPlain are exact ingest's heartbeats/s.
	IngestParents []float64 `json:"ingest_parents_heartbeats_per_second"`
	IngestPlain   []float64 `json:"ingest_plain_heartbeats_per_second"`
	RatioIngest   float64   `json:"ratio_ingest"`
}

const (
	// gatewayChildren is SPEC §14's dead gateway: 100,000 children.
	gatewayChildren = 100_000
	// gatewayParent is the parent of the bench's children; fleetParents
	// gives a gateway to every hundred devices of the ingest fleet.
	gatewayParent = "gw-000000"
	fleetParents  = 100
	// parentsTopic holds the ingest fleet's heartbeats with a parent.
	parentsTopic = "device-signals-parents"
	// The targets: children drain at 0.8 × plain devices, cost at most
	// their parent's id + 64 B, and ingest with parents at 0.9 × without.
	gatewayDrainTarget  = 0.8
	gatewayBytesTarget  = 64
	gatewayIngestTarget = 0.9
)

func runGatewayCost(ctx context.Context, o *options) (*GatewayCostResult, error) {
	res := &GatewayCostResult{Children: gatewayChildren, ParentIDBytes: len(gatewayParent)}
	if err := gatewayMemory(ctx, o, res); err != nil {
		return nil, err
	}
	var plainCPU, famCPU []float64
	var err error
	res.Plain, res.Family, err = inTurns(o.stormPairs, "plain", "children", func(k int, side string) (float64, error) {
		var fam *family
		run := 1 // no profile
		if side == "children" {
			fam, run = &family{parent: gatewayParent}, k // -cpuprofile: the first children's
		}
		r, err := runMassFamily(ctx, o, run, gatewayChildren, fam)
		if err != nil {
			return 0, err
		}
		if fam == nil {
			plainCPU = append(plainCPU, r.CPUSecondsPerMillion)
			status("gateway-cost: %d devices without a parent: %.0f events/s", gatewayChildren, r.EventsPerSecond)
			return r.EventsPerSecond, nil
		}
		famCPU = append(famCPU, r.CPUSecondsPerMillion)
		fam.mu.Lock()
		defer fam.mu.Unlock()
		res.Unreachable, res.ChildTimeouts, res.ChildrenHeld = fam.unreachable, fam.timeouts, fam.childrenHeld
		rate := 0.0
		if r.Completed && !fam.parentAt.IsZero() {
			// From the gateway's timeout, or the children's first event
			// if one came sooner.
			from := min(r.FirstSeconds, fam.parentAt.Sub(fam.deadline).Seconds())
			if span := r.LastSeconds - from; span > 0 {
				rate = float64(gatewayChildren) / span
			}
		}
		res.FamilyFromParent = append(res.FamilyFromParent, rate)
		status("gateway-cost: %d children of one gateway: %.0f events/s from the deadline, %.0f from the gateway's timeout; %d unreachable, %d timeouts, children_held %d",
			gatewayChildren, r.EventsPerSecond, rate, fam.unreachable, fam.timeouts, fam.childrenHeld)
		return r.EventsPerSecond, nil
	})
	if err != nil {
		return nil, err
	}
	res.RatioDrain = median(res.FamilyFromParent) / median(res.Plain)
	res.RatioCPU = median(famCPU) / median(plainCPU)
	if err := gatewayIngest(ctx, o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// gatewayMemory measures Redis's bytes per child over a device without a
// parent: gatewayChildren devices loaded without, then, on an emptied
// Redis, with a parent each.
func gatewayMemory(ctx context.Context, o *options, res *GatewayCostResult) error {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return err
	}
	defer infra.stop()
	ids := sample.DeviceIDs("m-", gatewayChildren)
	due := time.Now().Add(time.Hour).UnixMilli()
	var used [2]int64
	for k, parent := range []string{"", gatewayParent} {
		if err := infra.rp.rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		before, err := infra.rp.UsedMemory(ctx)
		if err != nil {
			return err
		}
		if _, err := loadFamily(ctx, infra.st, o.shards, ids, func(int) int64 { return due }, parent); err != nil {
			return err
		}
		after, err := infra.rp.UsedMemory(ctx)
		if err != nil {
			return err
		}
		used[k] = after - before
	}
	res.BytesPerChild = float64(used[1]-used[0]) / gatewayChildren
	status("gateway-cost: Redis bytes per device %.1f without a parent, %.1f with one (+%.1f; the parent's id is %d B)",
		float64(used[0])/gatewayChildren, float64(used[1])/gatewayChildren, res.BytesPerChild, len(gatewayParent))
	return nil
}

// gatewayIngest measures exact ingest of the ingest fleet naming a parent
// in every heartbeat (a gateway to every fleetParents devices) against the
// same fleet without, in turns.
func gatewayIngest(ctx context.Context, o *options, res *GatewayCostResult) error {
	infra, err := startInfra(ctx, o)
	if err != nil {
		return err
	}
	defer infra.stop()
	plain, err := infra.preloadBacklog(ctx, o, "gateway-cost")
	if err != nil {
		return err
	}
	parentOf := make(map[string]string, len(plain.ids))
	for k, id := range plain.ids {
		parentOf[id] = "gw-" + strconv.Itoa(k/fleetParents)
	}
	status("gateway-cost: the same heartbeats, each naming a parent, into %s", parentsTopic)
	parents := *plain
	parents.ends, err = preloadShaped(ctx, infra.brokers, parentsTopic, plain.ids, plain.rounds, plain.base, time.Second, func(id string, at time.Time) *kgo.Record {
		v := heartbeat(make([]byte, 0, 72), id, at.UnixMilli())
		v = append(append(append(v[:len(v)-1], `,"parent":"`...), parentOf[id]...), `"}`...)
		return &kgo.Record{Key: []byte(id), Value: v, Timestamp: at}
	})
	if err != nil {
		return err
	}
	res.IngestParents, res.IngestPlain, err = inTurns(o.stormPairs, "parents", "plain", func(k int, side string) (float64, error) {
		b, settings := plain, map[string]string(nil)
		if side == "parents" {
			b, settings = &parents, map[string]string{"kafka.signals_topic": parentsTopic}
		}
		run, err := infra.ingestBacklog(ctx, o, b, fmt.Sprintf("gateway-%s-%d", side, k+1), settings, nil)
		if err != nil {
			return 0, err
		}
		status("gateway-cost: exact ingest, %s: %.0f heartbeats/s", side, run.HeartbeatsPerSecond)
		return run.HeartbeatsPerSecond, nil
	})
	if err != nil {
		return err
	}
	res.RatioIngest = median(res.IngestParents) / median(res.IngestPlain)
	return nil
}
