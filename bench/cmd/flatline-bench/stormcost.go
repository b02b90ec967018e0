package main

import (
	"context"
	"fmt"
)

// StormCostResult is what the storm guard costs where it must not hold
// anything: exact ingest of a backlog and a mass expiry, each run with the
// guard on (the default storm.max_hold) and off (storm.max_hold 0),
// alternately, in the same run of the bench.
type StormCostResult struct {
	// IngestOn and IngestOff are the exact ingest runs' heartbeats/s;
	// MassOn and MassOff the mass expiries' events/s.
	IngestOn  []float64 `json:"ingest_guard_on_heartbeats_per_second"`
	IngestOff []float64 `json:"ingest_guard_off_heartbeats_per_second"`
	MassOn    []float64 `json:"mass_guard_on_events_per_second"`
	MassOff   []float64 `json:"mass_guard_off_events_per_second"`
	// The ratios are median(on) / median(off): 1 is no cost.
	RatioIngest float64 `json:"ratio_ingest"`
	RatioMass   float64 `json:"ratio_mass"`
}

// stormCostTarget: the guard costs at most 5 % of either figure.
const stormCostTarget = 0.95

func runStormCost(ctx context.Context, o *options) (*StormCostResult, error) {
	res := &StormCostResult{}
	infra, err := startInfra(ctx, o)
	if err != nil {
		return nil, err
	}
	b, err := infra.preloadBacklog(ctx, o, "storm-cost")
	if err != nil {
		infra.stop()
		return nil, err
	}
	res.IngestOn, res.IngestOff, err = guardPairs(o.stormPairs, func(k int, guard string, settings map[string]string) (float64, error) {
		run, err := infra.ingestBacklog(ctx, o, b, fmt.Sprintf("storm-guard-%s-%d", guard, k+1), settings, nil)
		if err != nil {
			return 0, err
		}
		status("storm-cost: exact ingest, guard %s: %.0f heartbeats/s", guard, run.HeartbeatsPerSecond)
		return run.HeartbeatsPerSecond, nil
	})
	infra.stop()
	if err != nil {
		return nil, err
	}
	res.MassOn, res.MassOff, err = guardPairs(o.stormPairs, func(_ int, guard string, settings map[string]string) (float64, error) {
		r, err := runMassOnce(ctx, o, 1, settings)
		if err != nil {
			return 0, err
		}
		status("storm-cost: mass expiry, guard %s: %.0f events/s", guard, r.EventsPerSecond)
		return r.EventsPerSecond, nil
	})
	if err != nil {
		return nil, err
	}
	res.RatioIngest = median(res.IngestOn) / median(res.IngestOff)
	res.RatioMass = median(res.MassOn) / median(res.MassOff)
	return res, nil
}

// guardPairs measures pairs times (at least once) with the guard on (the
// default storm.max_hold) and off (storm.max_hold 0) in turns (see
// inTurns); measure's k is the pair. It returns the figures of each.
func guardPairs(pairs int, measure func(k int, guard string, settings map[string]string) (float64, error)) (on, off []float64, err error) {
	settings := map[string]map[string]string{
		"on":  {"storm.max_hold": "5m"},
		"off": {"storm.max_hold": "0s"},
	}
	return inTurns(pairs, "on", "off", func(k int, side string) (float64, error) {
		return measure(k, side, settings[side])
	})
}

// inTurns measures pairs times (at least once) side a and side b, one after
// the other, so that a drift of the machine weighs on both alike, and in
// turns (a first in even pairs, b first in odd ones), so that whatever the
// first run after a pause pays does not fall on one side only. It returns
// the figures of each side.
func inTurns(pairs int, a, b string, measure func(k int, side string) (float64, error)) (as, bs []float64, err error) {
	for k := 0; k < max(1, pairs); k++ {
		order := []string{a, b}
		if k%2 == 1 {
			order = []string{b, a}
		}
		for _, side := range order {
			v, err := measure(k, side)
			if err != nil {
				return nil, nil, err
			}
			if side == a {
				as = append(as, v)
			} else {
				bs = append(bs, v)
			}
		}
	}
	return as, bs, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sortBy(s, func(x float64) float64 { return x })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
