// Command peers measures what a flatline user would otherwise build on
// Redis, on the redis-server it is given (flatline-bench starts a fresh one
// of the same kind its own scenarios use):
//
//   - asynq: one scheduled task per device; a reset is Inspector.DeleteTask
//     then Client.Enqueue with TaskID and ProcessIn, since asynq cannot move
//     a scheduled task;
//   - TTL keys: one key per device, a reset is SET key PXAT, a timeout is
//     the keyspace notification of its expiry (notify-keyspace-events Ex).
//
// For each: resets/s, lateness for sparse deadlines and for mass expiry,
// and events lost while the consumer is away for 2 s. It prints one JSON
// document on stdout ({"rows": [...], "details": {...}}) and progress on
// stderr.
//
// It is its own Go module so that flatline does not depend on asynq.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

type options struct {
	redis       string
	resetFor    time.Duration
	asynqTasks  int
	ttlKeys     int
	sparse      int
	spread      time.Duration
	ttlPopulate int
	massTTL     int
	massAsynq   int
	gap         time.Duration
	only        string
}

// Row is one figure.
type Row struct {
	System string  `json:"system"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Note   string  `json:"note,omitempty"`
}

type output struct {
	Rows    []Row          `json:"rows"`
	Details map[string]any `json:"details"`
}

var started = time.Now()

func status(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	o := &options{}
	flag.StringVar(&o.redis, "redis", "", "redis-server address (required; it is flushed)")
	flag.DurationVar(&o.resetFor, "reset-for", 5*time.Second, "how long each resets/s measurement runs")
	flag.IntVar(&o.asynqTasks, "asynq-tasks", 20_000, "scheduled tasks (devices) the asynq reset test cycles through")
	flag.IntVar(&o.ttlKeys, "ttl-keys", 200_000, "keys (devices) the TTL reset test cycles through")
	flag.IntVar(&o.sparse, "sparse", 2000, "deadlines of the sparse lateness test")
	flag.DurationVar(&o.spread, "spread", 10*time.Second, "window the sparse deadlines are spread over")
	flag.IntVar(&o.ttlPopulate, "ttl-population", 1_000_000, "other live TTL keys during the sparse TTL test (flatline's lateness scenario tracks 1,000,000 devices)")
	flag.IntVar(&o.massTTL, "mass-ttl", 1_000_000, "keys expiring at once (0: no TTL mass expiry)")
	flag.IntVar(&o.massAsynq, "mass-asynq", 50_000, "asynq tasks due at once")
	flag.DurationVar(&o.gap, "gap", 2*time.Second, "how long the consumer is away in the loss test")
	flag.StringVar(&o.only, "only", "", "run only asynq, ttl, or ttl-mass (the TTL keys' mass expiry alone)")
	flag.Parse()
	if o.redis == "" {
		fmt.Fprintln(os.Stderr, "peers: -redis is required")
		os.Exit(2)
	}
	ctx := context.Background()
	out := output{Details: map[string]any{}}
	fail := false
	if o.only == "ttl-mass" {
		fail = collect(ctx, o, &out, "ttl-mass", "ttl", runTTLMass) || fail
	}
	if o.only == "" || o.only == "ttl" {
		fail = collect(ctx, o, &out, "ttl", "ttl", runTTL) || fail
	}
	if o.only == "" || o.only == "asynq" {
		fail = collect(ctx, o, &out, "asynq", "asynq", runAsynq) || fail
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	if fail {
		os.Exit(1)
	}
}

// collect runs the measurement name, adding its rows to out and its details
// under key (whatever it got, also when it failed); it reports whether the
// measurement failed.
func collect[D any](ctx context.Context, o *options, out *output, name, key string, run func(context.Context, *options) ([]Row, D, error)) (failed bool) {
	rows, det, err := run(ctx, o)
	if err != nil {
		status("%s: FAILED: %v", name, err)
	}
	out.Rows = append(out.Rows, rows...)
	out.Details[key] = det
	return err != nil
}

// latencyRows reports a lateness distribution as rows; when some events
// never came, that comes first and the percentiles say they are of the
// delivered ones only.
func latencyRows(system, what string, d sample.Dist, want int, note string) []Row {
	var rows []Row
	of := ""
	if d.N < want {
		rows = append(rows, Row{System: system, Metric: what + ": NOT delivered within 10 s of the last deadline", Value: float64(want - d.N), Unit: "events", Note: note})
		of = fmt.Sprintf(" (of the %d delivered)", d.N)
	}
	rows = append(rows,
		Row{System: system, Metric: what + ": p50 lateness" + of, Value: d.P50, Unit: "ms", Note: note},
		Row{System: system, Metric: what + ": p99 lateness" + of, Value: d.P99, Unit: "ms", Note: note},
		Row{System: system, Metric: what + ": max lateness" + of, Value: d.Max, Unit: "ms", Note: note},
	)
	if d.Min < 0 {
		rows = append(rows, Row{System: system, Metric: what + ": earliest (fired BEFORE its deadline)", Value: d.Min, Unit: "ms", Note: note})
	}
	return rows
}
