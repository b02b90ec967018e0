package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A benchShape is a way bridges write heartbeats (the README's "Real
// sources"), for the ingest rows that read it: how the bench writes a
// heartbeat, and the ingest settings of the README's block for it.
type benchShape struct {
	name     string
	topic    string
	record   func(id string, at time.Time) *kgo.Record
	settings map[string]string
	target   float64 // of the run's ZADD GT ceiling
}

var benchShapes = []benchShape{
	{
		name: "emqx5", topic: "device-signals-emqx5", target: 0.5,
		// EMQX 5's Kafka sink, keyed by client id as its templates usually
		// are; the device's own message a JSON string in payload.
		record: func(id string, at time.Time) *kgo.Record {
			ms := strconv.FormatInt(at.UnixMilli(), 10)
			payload := `{"ts":` + ms + `,"temp":21.5}`
			v := `{"id":"0006` + ms + `","clientid":"` + id + `","username":"fleet","topic":"devices/` + id + `/up","timestamp":` + ms +
				`,"qos":1,"payload":` + strconv.Quote(payload) + `}`
			return &kgo.Record{Key: []byte(id), Value: []byte(v), Timestamp: at}
		},
		settings: map[string]string{
			"ingest.from.device_id": "value:clientid", "ingest.from.ts": "payload:ts", "ingest.from.class": "payload:class",
			"ingest.from.timeout_ms": "payload:timeout_ms", "ingest.from.parent": "payload:parent", "ingest.payload": "value:payload",
		},
	},
	{
		name: "mqtt-topic", topic: "device-signals-mqtt", target: 0.6,
		// HiveMQ's Kafka extension: key = the MQTT topic, the raw payload.
		record: func(id string, at time.Time) *kgo.Record {
			return &kgo.Record{Key: []byte("devices/" + id + "/up"), Value: []byte("\x02\x11raw"), Timestamp: at}
		},
		settings: map[string]string{"ingest.format": "key", "ingest.from.device_id": "key:^devices/([^/]+)/", "ingest.from.ts": "kafka"},
	},
}

// ShapeResult is the exact ingest of one shape over the same fleet.
type ShapeResult struct {
	Shape string       `json:"shape"`
	Runs  []*IngestRun `json:"runs"`
	// Median is the median run; Ratio its heartbeats/s over the median
	// ceiling of the run's pairs.
	Median *IngestRun `json:"median"`
	Ratio  float64    `json:"ratio_to_ceiling"`
	Target float64    `json:"target"`
}

// shapeTopics are the topics the shapes preload into.
func shapeTopics(names []string) []string {
	var out []string
	for _, s := range benchShapes {
		if containsName(names, s.name) {
			out = append(out, s.topic)
		}
	}
	return out
}

func containsName(names []string, name string) bool {
	for _, n := range names {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// runShapes preloads each selected shape's topic with the same fleet and
// runs exact ingest over it as many times as the native pairs, each
// figure over the median ceiling of the run.
func runShapes(ctx context.Context, o *options, infra *scenarioInfra, ids []string, rounds, heartbeats int, base time.Time, medianCeiling float64) ([]ShapeResult, error) {
	var out []ShapeResult
	for _, sh := range benchShapes {
		if !containsName(o.shapes, sh.name) {
			continue
		}
		status("ingest: preloading %d heartbeats in the %s shape into %s", heartbeats, sh.name, sh.topic)
		ends, err := preloadShaped(ctx, infra.brokers, sh.topic, ids, rounds, base, time.Second, sh.record)
		if err != nil {
			return nil, err
		}
		res := ShapeResult{Shape: sh.name, Target: sh.target}
		for k := 0; k < max(1, o.ingestPairs); k++ {
			if err := infra.rp.rdb.FlushAll(ctx).Err(); err != nil {
				return nil, err
			}
			settings := map[string]string{"kafka.signals_topic": sh.topic}
			for key, v := range sh.settings {
				settings[key] = v
			}
			mode := fmt.Sprintf("shape-%s-%d", sh.name, k+1)
			run, err := ingestOnce(ctx, o, infra.brokers, infra.rp, infra.st, ends, heartbeats, mode, settings)
			if err != nil {
				return nil, err
			}
			status("ingest: %s shape %.0f heartbeats/s from start (%.2f × the median ceiling)", sh.name, run.HeartbeatsPerSecond, run.HeartbeatsPerSecond/medianCeiling)
			res.Runs = append(res.Runs, run)
		}
		sorted := append([]*IngestRun(nil), res.Runs...)
		sortBy(sorted, func(r *IngestRun) float64 { return r.HeartbeatsPerSecond })
		res.Median = sorted[len(sorted)/2]
		if medianCeiling > 0 {
			res.Ratio = res.Median.HeartbeatsPerSecond / medianCeiling
		}
		out = append(out, res)
	}
	return out, nil
}
