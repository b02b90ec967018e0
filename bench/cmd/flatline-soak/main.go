// Command flatline-soak runs flatline for a long while the way a platform
// runs it and says whether anything it holds grows (docs/operations.md,
// "Running for weeks").
//
// Two `flatline serve` processes (the built binary, configured by FLATLINE_*
// variables) share a private redis-server and an in-process Kafka (franz-go's
// kfake, over TCP; signals topic of 8 partitions). A fleet written by an
// independent franz-go producer beats steadily, while devices join, leave
// (a tombstone, then nothing) and go silent. Each instance is probed and
// scraped at platform cadence on a new connection each time: /healthz and
// /readyz every 5 s, /metrics every 15 s, /status every 2 s. In the first
// half come the disturbances: a rolling restart, a third instance started
// and stopped (consumer-group rebalances and scanner leases moving), and
// `flatline shards scale` up and back down. The second half is steady load
// and probes only, so that what a resource does there is its trend, not a
// step some disturbance caused.
//
// Every 10 s it samples each instance's goroutines and Go heap (/metrics),
// open files, resident set and established TCP connections to Kafka and to
// Redis (/proc), and Redis' connected_clients. It prints, per resource, the
// least-squares slope over the second half in units per hour, a bound and a
// verdict; and, from an independent reader of the timeouts topic, that
// every silent device fired once (once per event_id around a restart),
// no live or tombstoned device fired, and every instance stopped with exit
// status 0. The result goes to bench/results/soak-<UTC time>.json; the exit
// status is 1 when a verdict fails.
//
// Usage (see `make soak`):
//
//	flatline-soak [-duration 20m] [-flatline bin/flatline] [-devices 5000] [-out bench/results]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// options are the command line; SOAK_DURATION gives -duration's default.
type options struct {
	duration   time.Duration
	flatline   string
	out        string
	devices    int
	interval   time.Duration
	timeout    time.Duration
	partitions int
	shards     int
	// churnEvery is how often devices join, leave and go silent; each time
	// joinN join, leaveN leave and silenceN go silent.
	churnEvery              time.Duration
	joinN, leaveN, silenceN int
	sampleEvery             time.Duration
	restartTimeout          time.Duration
	readyTimeout            time.Duration
	migrationTimeout        time.Duration
	quietEnd                time.Duration
	settle                  time.Duration
}

func defaultOptions() options {
	return options{
		duration: 20 * time.Minute, flatline: "bin/flatline", out: "bench/results",
		// 5,000 beats/s in all: a steady load that keeps each instance
		// well under a core on the 2-core machine, with the fleet, kfake
		// and redis-server beside them.
		devices: 5000, interval: time.Second, timeout: 3 * time.Second,
		partitions: 8, shards: 16,
		churnEvery: 15 * time.Second, joinN: 10, leaveN: 5, silenceN: 5,
		sampleEvery:      10 * time.Second,
		restartTimeout:   30 * time.Second,
		readyTimeout:     60 * time.Second,
		migrationTimeout: 2 * time.Minute,
		// No device goes silent in the last 30 s, so each has fired (3 s
		// timeout, plus whatever a restart held) before the end.
		quietEnd: 30 * time.Second,
	}
}

func parseOptions(args []string) (options, error) {
	o := defaultOptions()
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return o, fmt.Errorf("SOAK_DURATION=%q: %w", v, err)
		}
		o.duration = d
	}
	fs := flag.NewFlagSet("flatline-soak", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", o.duration, "how long the soak runs once everything is up; SOAK_DURATION sets the default")
	fs.StringVar(&o.flatline, "flatline", o.flatline, "the flatline binary to run (make soak builds it)")
	fs.StringVar(&o.out, "out", o.out, "directory of the JSON result")
	fs.IntVar(&o.devices, "devices", o.devices, "devices beating from the start")
	fs.DurationVar(&o.interval, "interval", o.interval, "how often every device beats")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "the devices' timeout (timeouts.default)")
	fs.DurationVar(&o.churnEvery, "churn-every", o.churnEvery, "how often devices join, leave and go silent")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, o.Validate()
}

// Validate checks that the run is long enough for its plan: the
// disturbances in the first half and a second half with samples enough
// for a slope.
func (o *options) Validate() error {
	if o.duration < 2*time.Minute {
		return fmt.Errorf("-duration %s: at least 2m (the disturbances need the first half, the slopes the second)", o.duration)
	}
	if o.devices < 100 {
		return fmt.Errorf("-devices %d: at least 100", o.devices)
	}
	if o.timeout <= 2*o.interval {
		return fmt.Errorf("-timeout %s must be more than twice -interval %s: a live device may not fire", o.timeout, o.interval)
	}
	if o.churnEvery < time.Second {
		return fmt.Errorf("-churn-every %s: at least 1s", o.churnEvery)
	}
	// After the last disturbance, a pause before the second half's window
	// opens, so a slope does not start on a step's tail: 30 s, less in
	// short validation runs.
	o.settle = min(30*time.Second, max(10*time.Second, o.duration/40))
	return nil
}

// started is when the program started, for the progress lines.
var started = time.Now()

// status prints a progress line on stderr.
func status(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() { os.Exit(run()) }

func run() int {
	o, err := parseOptions(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flatline-soak:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := soak(ctx, o)
	if res != nil {
		res.print(os.Stdout)
		path, werr := res.write(o.out)
		if werr != nil {
			fmt.Fprintln(os.Stderr, "flatline-soak: write result:", werr)
			return 1
		}
		fmt.Printf("\nresult: %s\n", path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flatline-soak:", err)
		return 1
	}
	if !res.Pass {
		return 1
	}
	return 0
}
