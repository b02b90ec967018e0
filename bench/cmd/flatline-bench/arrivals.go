package main

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/flatline-dev/flatline/bench/internal/sample"
	"github.com/flatline-dev/flatline/dispatch"
)

// Arrivals is how the timeout events of the devices a scenario watched
// reached the test consumer: each device's first event is a sample, a
// repeat of it a duplicate.
type Arrivals struct {
	Duplicates int `json:"duplicates"`
	// Lateness: the event's arrival at the test consumer − its deadline
	// (an upper bound of "acknowledged by Kafka − deadline").
	Lateness sample.Dist `json:"arrival_minus_deadline"`
	// Detected: detected_at_ms − deadline_ms, as the event says.
	Detected sample.Dist `json:"detected_minus_deadline"`
}

// arrivalTally gathers Arrivals from the test consumer (add is its
// callback, safe beside the scenario's reads): of the timeout events
// whose key starts with the watched prefix; the other timeouts it counts.
type arrivalTally struct {
	prefix         []byte
	mu             sync.Mutex
	seen           map[string]bool
	late, detected []float64
	dups, others   int
}

func newArrivalTally(prefix string) *arrivalTally {
	return &arrivalTally{prefix: []byte(prefix), seen: map[string]bool{}}
}

func (c *arrivalTally) add(a arrival) {
	var ev dispatch.Event
	if json.Unmarshal(a.value, &ev) != nil || ev.Type != dispatch.TypeTimeout {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !bytes.HasPrefix(a.key, c.prefix) {
		c.others++
		return
	}
	if c.seen[ev.DeviceID] {
		c.dups++
		return
	}
	c.seen[ev.DeviceID] = true
	c.late = append(c.late, float64(a.at.UnixMicro())/1e3-float64(ev.DeadlineMs))
	c.detected = append(c.detected, float64(ev.DetectedAtMs-ev.DeadlineMs))
}

// received is how many watched devices' timeouts have arrived.
func (c *arrivalTally) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.late)
}

// result returns the watched devices' timeouts received so far, their
// Arrivals, and how many other timeouts arrived.
func (c *arrivalTally) result() (received int, a Arrivals, others int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a = Arrivals{Duplicates: c.dups, Lateness: sample.DistOf(c.late), Detected: sample.DistOf(c.detected)}
	return len(c.late), a, c.others
}
