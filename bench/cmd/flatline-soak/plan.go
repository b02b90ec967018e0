package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// The disturbances all happen in the first half, at these fractions of the
// run (each waits for the one before it): the second half then measures
// the processes that lived through every one of them, under steady load
// and probes alone. The rolling restart comes first so that those
// processes are the restarted ones and have seen the rebalances and the
// scaling since.
const (
	atRestart   = 0.06
	atThird     = 0.18
	atScaleUp   = 0.28
	atScaleDown = 0.36
)

const (
	// rollingPause is how long a rolling update waits after a replacement
	// is ready before it stops the next (a Deployment's minReadySeconds):
	// long enough for the consumer group and the scanner leases to settle.
	rollingPause = 10 * time.Second
	// thirdHold is the least time the third instance runs once ready: a
	// rebalance to it and its share of the scanner leases (lease_ttl 5 s).
	thirdHold = 30 * time.Second
	// dupGrace extends a window of stopping or starting past its end: a
	// timeout due within it may be published twice (the same event_id).
	dupGrace = 15 * time.Second
)

// window is a span in which a slot's process was stopping or starting:
// probes may fail in it, and a timeout due in it may be published again.
type window struct {
	Kind     string    `json:"kind"`
	Slot     string    `json:"slot"`
	From, To time.Time `json:"-"`
	// FromS and ToS are From and To in seconds since the soak's start.
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
}

func inAny(ws []window, t time.Time) bool {
	for _, w := range ws {
		if !t.Before(w.From) && !t.After(w.To) {
			return true
		}
	}
	return false
}

// step is one disturbance as it happened.
type step struct {
	Name     string  `json:"name"`
	PlannedS float64 `json:"planned_s"`
	StartS   float64 `json:"start_s"`
	EndS     float64 `json:"end_s"`
	Detail   string  `json:"detail,omitempty"`
	Err      string  `json:"error,omitempty"`
}

// exit is how a process ended.
type exit struct {
	ID    string  `json:"instance_id"`
	AtS   float64 `json:"at_s"`
	Code  int     `json:"code"`
	Error string  `json:"error,omitempty"`
}

// plan runs the disturbances and starts and stops the instances.
type plan struct {
	o        options
	in       *infra
	slots    *slots
	settings map[string]string // every instance's configuration
	addrs    map[string]string // slot -> HTTP address, kept across restarts
	gens     map[string]int
	t0       time.Time
	// probe starts the platform's probes of a slot and returns their stop.
	probe func(slot, addr string) (stop func())

	mu        sync.Mutex
	steps     []step
	windows   []window
	exits     []exit
	halving   bool // `flatline shards scale --help` offers halving
	lastEnd   time.Time
	skipped   string // a disturbance left out, and why
	stepError error  // the first step that went wrong
}

func (p *plan) since(t time.Time) float64 { return t.Sub(p.t0).Seconds() }

// start starts the next generation of slot and waits until it is ready.
func (p *plan) start(ctx context.Context, slot string) (*instance, error) {
	addr, ok := p.addrs[slot]
	if !ok {
		port, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
		p.addrs[slot] = addr
	}
	p.gens[slot]++
	in, err := startInstance(p.o.flatline, slot, p.gens[slot], addr, p.settings)
	if err != nil {
		return nil, err
	}
	if err := in.waitReady(ctx, p.o.readyTimeout); err != nil {
		_, _ = in.stop(p.o.restartTimeout)
		return nil, err
	}
	p.slots.set(in)
	return in, nil
}

// stop SIGTERMs slot's process and records its exit.
func (p *plan) stop(slot string) exit {
	in := p.slots.get(slot)
	code, err := in.stop(p.o.restartTimeout)
	e := exit{ID: in.id, AtS: p.since(time.Now()), Code: code}
	if err != nil {
		e.Error = err.Error()
	}
	p.mu.Lock()
	p.exits = append(p.exits, e)
	p.mu.Unlock()
	return e
}

func (p *plan) addWindow(kind, slot string, from, to time.Time) {
	to = to.Add(dupGrace)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.windows = append(p.windows, window{Kind: kind, Slot: slot, From: from, To: to, FromS: p.since(from), ToS: p.since(to)})
}

// Run runs the disturbances in order, each at its time or when the one
// before it is done. An error is an instance that could not be started
// again: the soak cannot go on.
func (p *plan) Run(ctx context.Context) error {
	type disturbance struct {
		name string
		at   float64
		do   func(context.Context) (string, error)
	}
	ds := []disturbance{
		{"rolling restart of a and b", atRestart, p.rollingRestart},
		{"third instance c started and stopped", atThird, p.thirdInstance},
		{"shards scale --to 32", atScaleUp, func(ctx context.Context) (string, error) { return p.scale(ctx, 32) }},
	}
	if p.halving {
		ds = append(ds, disturbance{"shards scale --to 16", atScaleDown, func(ctx context.Context) (string, error) { return p.scale(ctx, 16) }})
	} else {
		p.skipped = "shards scale --to 16: `flatline shards scale --help` does not offer halving; scaled up only"
	}
	for _, d := range ds {
		planned := p.t0.Add(time.Duration(d.at * float64(p.o.duration)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(planned)):
		}
		status("disturbance: %s", d.name)
		st := step{Name: d.name, PlannedS: p.since(planned), StartS: p.since(time.Now())}
		detail, err := d.do(ctx)
		st.EndS, st.Detail = p.since(time.Now()), detail
		if err != nil {
			st.Err = err.Error()
			status("disturbance: %s: %v", d.name, err)
		} else {
			status("disturbance: %s: done (%s)", d.name, detail)
		}
		p.mu.Lock()
		p.steps = append(p.steps, st)
		p.lastEnd = time.Now()
		if err != nil && p.stepError == nil {
			p.stepError = fmt.Errorf("%s: %w", d.name, err)
		}
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			return p.stepError
		}
	}
	return nil
}

// rollingRestart replaces a, then b, as a Deployment's rolling update
// does: SIGTERM, exit 0, start the replacement, wait until it is ready,
// pause.
func (p *plan) rollingRestart(ctx context.Context) (string, error) {
	var detail []string
	for _, slot := range []string{"a", "b"} {
		from := time.Now()
		e := p.stop(slot)
		p.slots.remove(slot)
		in, err := p.start(ctx, slot)
		if err != nil {
			return strings.Join(detail, "; "), err
		}
		p.addWindow("restart", slot, from, in.ready)
		detail = append(detail, fmt.Sprintf("%s exit %d, %s ready after %.1fs", e.ID, e.Code, in.id, in.ready.Sub(from).Seconds()))
		if e.Error != "" {
			return strings.Join(detail, "; "), fmt.Errorf("%s", e.Error)
		}
		if err := sleep(ctx, rollingPause); err != nil {
			return strings.Join(detail, "; "), err
		}
	}
	return strings.Join(detail, "; "), nil
}

// thirdInstance starts c, lets the group and the leases rebalance to it,
// and stops it again: two more consumer-group generations.
func (p *plan) thirdInstance(ctx context.Context) (string, error) {
	from := time.Now()
	in, err := p.start(ctx, "c")
	if err != nil {
		return "", err
	}
	p.addWindow("start", "c", from, in.ready)
	stopProbes := p.probe("c", in.httpAddr)
	hold := max(thirdHold, time.Duration((atScaleUp-atThird)*float64(p.o.duration))/2)
	if err := sleep(ctx, hold); err != nil {
		stopProbes()
		return "", err
	}
	stopProbes()
	from = time.Now()
	e := p.stop("c")
	p.slots.remove("c")
	p.addWindow("stop", "c", from, time.Now())
	detail := fmt.Sprintf("%s ready after %.1fs, ran %s, exit %d", in.id, in.ready.Sub(in.started).Seconds(), hold, e.Code)
	if e.Error != "" {
		return detail, fmt.Errorf("%s", e.Error)
	}
	return detail, nil
}

// scale runs `flatline shards scale --to n --yes` and waits until `flatline
// shards status` shows the layout at n with no migration left.
func (p *plan) scale(ctx context.Context, n int) (string, error) {
	start := time.Now()
	out, err := p.cli(ctx, "shards", "scale", "--to", fmt.Sprint(n), "--yes")
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(p.o.migrationTimeout)
	for {
		st, err := p.shardsStatus(ctx)
		if err == nil && st.Layout.Count == n && !st.Migration.Active {
			return fmt.Sprintf("%s; finalized after %.1fs", strings.TrimSpace(out), time.Since(start).Seconds()), nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("layout %d shards, migration active %v, %d misplaced", st.Layout.Count, st.Migration.Active, st.Migration.Misplaced)
			}
			return "", fmt.Errorf("not finalized within %s: %w", p.o.migrationTimeout, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return "", err
		}
	}
}

func (p *plan) shardsStatus(ctx context.Context) (inspect.Status, error) {
	var st inspect.Status
	out, err := p.cli(ctx, "shards", "status", "-o", "json")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return st, fmt.Errorf("shards status -o json: %w", err)
	}
	return st, nil
}

// cli runs the flatline binary with args against the soak's Redis and
// Kafka, returning its standard output.
func (p *plan) cli(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.o.flatline, args...)
	cmd.Env = testenv.SettingsEnv(p.settings)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("flatline %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// offersHalving reads `flatline shards scale --help`: whether this build
// can halve the shard count ("--to: double or half the current one"), or
// only double it.
func offersHalving(ctx context.Context, bin string) (bool, error) {
	out, err := exec.CommandContext(ctx, bin, "shards", "scale", "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s shards scale --help: %w: %s", bin, err, out)
	}
	help := strings.ToLower(string(out))
	return strings.Contains(help, "halve") || strings.Contains(help, "half"), nil
}

// every calls fn each period until ctx ends or fn returns false; its
// error is nil (a loop of the soak ends with the soak, not on its own).
func every(ctx context.Context, period time.Duration, fn func(now time.Time) bool) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if !fn(now) {
				return nil
			}
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
