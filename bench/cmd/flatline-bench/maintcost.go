package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/shard"
)

// MaintenanceCostResult is what open maintenance windows cost heartbeats
// (SPEC §15: matching happens when a deadline passes, never per
// heartbeat): exact ingest of the same backlog with maintWindows windows
// open and with none, alternately, in the same run of the bench.
type MaintenanceCostResult struct {
	Windows int `json:"windows"`
	// Open and None are the runs' heartbeats/s after their first write:
	// what the heartbeats cost. An instance loads the windows before it
	// reads anything (about 50 ms for 10,000 on the bench's machine), a
	// cost of its start, which OpenFromStart and NoneFromStart include.
	Open          []float64 `json:"ingest_windows_open_heartbeats_per_second_after_first_write"`
	None          []float64 `json:"ingest_no_windows_heartbeats_per_second_after_first_write"`
	OpenFromStart []float64 `json:"ingest_windows_open_heartbeats_per_second"`
	NoneFromStart []float64 `json:"ingest_no_windows_heartbeats_per_second"`
	// Ratio is median(Open) / median(None): 1 is no cost; RatioFromStart
	// the same from the instance's start.
	Ratio          float64 `json:"ratio_ingest"`
	RatioFromStart float64 `json:"ratio_ingest_from_start"`
}

const (
	// maintWindows is the most windows SPEC §15 lets be open at once.
	maintWindows = 10_000
	// maintCostTarget: open windows cost heartbeats at most 5 %.
	maintCostTarget = 0.95
)

func runMaintenanceCost(ctx context.Context, o *options) (*MaintenanceCostResult, error) {
	res := &MaintenanceCostResult{Windows: maintWindows}
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	defer infra.stop()
	b, err := infra.preloadBacklog(ctx, o, "maintenance-cost")
	if err != nil {
		return nil, err
	}
	// A whole instance, so that its scanners load and follow the windows
	// while it ingests (an instance of the ingest role alone never reads
	// them).
	settings := map[string]string{"roles": "ingest,scanner"}
	res.Open, res.None, err = inTurns(o.stormPairs, "open", "no", func(k int, side string) (float64, error) {
		var open func() error
		if side == "open" {
			open = func() error { return openWindows(ctx, infra.st, maintWindows) }
		}
		run, err := infra.ingestBacklog(ctx, o, b, fmt.Sprintf("maintenance-%s-%d", side, k+1), settings, open)
		if err != nil {
			return 0, err
		}
		status("maintenance-cost: exact ingest, %s windows: %.0f heartbeats/s (first write at %.2f s, %.0f/s after it)", side, run.HeartbeatsPerSecond, run.FirstWriteSeconds, run.SteadyPerSecond)
		if side == "open" {
			res.OpenFromStart = append(res.OpenFromStart, run.HeartbeatsPerSecond)
		} else {
			res.NoneFromStart = append(res.NoneFromStart, run.HeartbeatsPerSecond)
		}
		return run.SteadyPerSecond, nil
	})
	if err != nil {
		return nil, err
	}
	res.Ratio = median(res.Open) / median(res.None)
	res.RatioFromStart = median(res.OpenFromStart) / median(res.NoneFromStart)
	return res, nil
}

// openWindows opens n windows for an hour, as `flatline maintenance start`
// stores them, matching none of the fleet's devices: a third by prefix, a
// third by class, a third by a list of ten device ids.
func openWindows(ctx context.Context, st *shard.Store, n int) error {
	now := time.Now().UnixMilli()
	for k := range n {
		w := shard.Window{ID: fmt.Sprintf("bench-%05d", k), FromMs: now, UntilMs: now + time.Hour.Milliseconds(), Reason: "bench"}
		switch k % 3 {
		case 0:
			w.Match.Prefix = fmt.Sprintf("site-%05d/", k)
		case 1:
			w.Match.Class = fmt.Sprintf("class-%05d", k)
		default:
			for d := range 10 {
				w.Match.Devices = append(w.Match.Devices, fmt.Sprintf("gone-%05d-%d", k, d))
			}
		}
		if _, err := st.StartWindow(ctx, w, n, now, now); err != nil {
			return fmt.Errorf("open window %d: %w", k, err)
		}
	}
	return nil
}
