package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
	"github.com/flatline-dev/flatline/dispatch"
)

// timeoutsVerdict is what the independent reader of the timeouts topic
// saw, against what the fleet did.
type timeoutsVerdict struct {
	Events      int `json:"events"`
	Timeouts    int `json:"timeout_events"`
	Recovered   int `json:"recovered_events"`
	Storm       int `json:"storm_events"`
	Undecodable int `json:"undecodable_records"`

	Silent int `json:"silent_devices"`
	// FiredOnce are silent devices with exactly one timeout event.
	FiredOnce int `json:"fired_once"`
	// Repeated are silent devices whose one event_id came more than once
	// with its deadline inside a window of stopping or starting:
	// at-least-once delivery, deduplicated by event_id.
	Repeated int `json:"repeated_in_restart_windows"`
	// RepeatedOutside are the same outside every such window: a fault.
	RepeatedOutside int `json:"repeated_outside_restart_windows"`
	Missed          int `json:"missed"`

	// False timeouts: of a device beating (live), of a tombstoned one
	// (left), of an id the fleet never had, or of a silent device for a
	// deadline other than its last heartbeat's (it fired while beating).
	FalseLive          int `json:"false_live"`
	FalseLeft          int `json:"false_left"`
	FalseUnknown       int `json:"false_unknown"`
	FalseWrongDeadline int `json:"false_wrong_deadline"`

	// Examples names up to 20 of the faults above.
	Examples []string `json:"examples,omitempty"`
	// Lateness is from each silent device's deadline to the reader getting
	// its first timeout.
	Lateness sample.Dist `json:"lateness_ms"`
	Pass     bool        `json:"pass"`
}

func (v *timeoutsVerdict) falseCount() int {
	return v.FalseLive + v.FalseLeft + v.FalseUnknown + v.FalseWrongDeadline
}

func (v *timeoutsVerdict) example(format string, args ...any) {
	if len(v.Examples) < 20 {
		v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
	}
}

// checkTimeouts compares the events read with the fleet's devices, once
// the fleet and every instance have stopped and the reader has caught up.
// A timeout due within a window (stretched back by the timeout) may come
// twice with the same event_id; elsewhere once.
func checkTimeouts(devs []*device, events []received, undecodable int, timeout time.Duration, windows []window) timeoutsVerdict {
	v := timeoutsVerdict{Events: len(events), Undecodable: undecodable}
	byID := make(map[string]*device, len(devs))
	for _, d := range devs {
		byID[d.id] = d
	}
	got := map[string][]received{} // expected event_id -> its arrivals
	for _, e := range events {
		switch e.Type {
		case dispatch.TypeRecovered:
			v.Recovered++
			v.example("recovered event %s: no device beats again after it stops", e.EventID)
			continue
		case dispatch.TypeStorm:
			v.Storm++
			continue
		case dispatch.TypeTimeout:
		default:
			v.Undecodable++
			continue
		}
		v.Timeouts++
		d := byID[e.DeviceID]
		switch {
		case d == nil:
			v.FalseUnknown++
			v.example("timeout of unknown device %q", e.DeviceID)
		case d.state == live:
			v.FalseLive++
			v.example("timeout of live device %s, deadline %s", d.id, msTime(e.DeadlineMs))
		case d.state == left:
			v.FalseLeft++
			v.example("timeout of %s, tombstoned at %s, deadline %s", d.id, d.changed.Format("15:04:05.000"), msTime(e.DeadlineMs))
		default:
			want := dispatch.TimeoutEventID(d.id, d.lastAck.Load()+timeout.Milliseconds())
			if e.EventID != want {
				v.FalseWrongDeadline++
				v.example("timeout of %s with event_id %s; its last heartbeat makes it %s", d.id, e.EventID, want)
				continue
			}
			got[want] = append(got[want], e)
		}
	}
	var late []float64
	for _, d := range devs {
		if d.state != silent {
			continue
		}
		v.Silent++
		deadlineMs := d.lastAck.Load() + timeout.Milliseconds()
		arr := got[dispatch.TimeoutEventID(d.id, deadlineMs)]
		switch {
		case len(arr) == 0:
			v.Missed++
			v.example("missed: %s, silent since %s, deadline %s", d.id, d.changed.Format("15:04:05.000"), msTime(deadlineMs))
			continue
		case len(arr) == 1:
			v.FiredOnce++
		case inAny(stretch(windows, timeout), time.UnixMilli(deadlineMs)):
			v.Repeated++
		default:
			v.RepeatedOutside++
			v.example("%s fired %d times outside any restart window (deadline %s)", d.id, len(arr), msTime(deadlineMs))
		}
		first := slices.MinFunc(arr, func(a, b received) int { return a.At.Compare(b.At) })
		late = append(late, float64(first.At.UnixMilli()-deadlineMs))
	}
	v.Lateness = sample.DistOf(late)
	v.Pass = v.falseCount() == 0 && v.Missed == 0 && v.RepeatedOutside == 0 && v.Recovered == 0 && v.Undecodable == 0
	return v
}

// stretch moves every window's start back by d: a device due just before
// an instance stopped may be in flight while it stops.
func stretch(ws []window, d time.Duration) []window {
	out := slices.Clone(ws)
	for i := range out {
		out[i].From = out[i].From.Add(-d)
	}
	return out
}

func msTime(ms int64) string { return time.UnixMilli(ms).Format("15:04:05.000") }
