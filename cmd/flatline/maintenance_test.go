package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/shard"
)

// A window is started (its id printed, or the window as /status lists it),
// listed while open, ended, and listed with --all once ended.
func TestMaintenanceStartListEnd(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	r := run(t, f.env, "maintenance", "start", "--device", "a,b", "--device", "c", "--for", "1h", "--reason", "firmware", "-o", "json")
	if r.code != 0 {
		t.Fatalf("start: %d %s", r.code, r.stderr)
	}
	var w inspect.WindowStatus
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
		t.Fatalf("start -o json: %v in %q", err, r.stdout)
	}
	if strings.Join(w.Match.Devices, ",") != "a,b,c" || w.Reason != "firmware" || w.Held != 0 || w.UntilMs-w.FromMs != time.Hour.Milliseconds() {
		t.Fatalf("window %+v", w)
	}
	if !strings.Contains(r.stdout, `"held": 0`) || !strings.Contains(r.stdout, `"reason": "firmware"`) {
		t.Fatalf("start -o json lacks held or reason: %s", r.stdout)
	}
	r = run(t, f.env, "maintenance", "start", "--prefix", "rack-7/", "--until", time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339))
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(id, "m-") {
		t.Fatalf("start: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, f.env, "maintenance", "list")
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "prefix rack-7/") || !strings.Contains(r.stdout, w.ID) {
		t.Fatalf("list: %d %q", r.code, r.stdout)
	}
	if r = run(t, f.env, "shards", "status"); r.code != 0 || !strings.Contains(r.stdout, "maintenance windows open: 2, devices held: 0") {
		t.Fatalf("shards status: %d %q", r.code, r.stdout)
	}
	if r = run(t, f.env, "maintenance", "end", id); r.code != 0 || !strings.Contains(r.stdout, "ended "+id) {
		t.Fatalf("end: %d %q %s", r.code, r.stdout, r.stderr)
	}
	var open, all []inspect.WindowStatus
	_ = json.Unmarshal([]byte(run(t, f.env, "maintenance", "list", "-o", "json").stdout), &open)
	_ = json.Unmarshal([]byte(run(t, f.env, "maintenance", "list", "--all", "-o", "json").stdout), &all)
	if len(open) != 1 || open[0].ID != w.ID || len(all) != 2 || all[1].ID != id || all[1].EndedAtMs == 0 {
		t.Fatalf("open %+v, all %+v", open, all)
	}
	if r = run(t, f.env, "maintenance", "end", id); r.code == 0 || !strings.Contains(r.stderr, "already ended") {
		t.Fatalf("ending twice: %d %q", r.code, r.stderr)
	}
}

// Each limit is refused with one line naming it and its value.
func TestMaintenanceLimitsAreRefusedInOneLine(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ids := make([]string, 1001)
	for k := range ids {
		ids[k] = "d-" + strconv.Itoa(k)
	}
	ctx := context.Background()
	now := time.Now()
	for k := 0; k < 10_000; k++ {
		w := shard.Window{ID: "w" + strconv.Itoa(k), Match: shard.WindowMatch{Prefix: "p"}, FromMs: now.UnixMilli(), UntilMs: now.Add(time.Hour).UnixMilli()}
		if _, err := f.store.StartWindow(ctx, w, 10_000, now.UnixMilli(), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--device", strings.Join(ids, ","), "--for", "1h"}, "--device takes at most 1,000 ids, got 1001"},
		{[]string{"--class", "cam", "--for", "169h"}, "a window lasts at most maintenance.max_duration (168h0m0s), got 169h0m0s"},
		{[]string{"--class", "cam", "--for", "1h"}, "at most 10,000 maintenance windows are open at once: end one first"},
		{[]string{"--class", "cam", "--prefix", "x", "--for", "1h"}, "give exactly one of --device, --class and --prefix"},
		{[]string{"--class", "cam", "--until", "tomorrow"}, `--until: not RFC 3339: "tomorrow"`},
	} {
		r := run(t, f.env, append([]string{"maintenance", "start"}, c.args...)...)
		if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("start %s: exit %d, stderr %q; want one line with %q", c.args[0], r.code, r.stderr, c.want)
		}
	}
}

// holdByWindow opens a window on f that holds device id (tracked in shard
// 0), as a scanner would have parked it.
func holdByWindow(t *testing.T, f fleet, id string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	w := shard.Window{ID: "w-held", Match: shard.WindowMatch{Devices: []string{id}}, FromMs: now.UnixMilli(), UntilMs: now.Add(time.Hour).UnixMilli()}
	if _, err := f.store.StartWindow(ctx, w, 10, now.UnixMilli(), 0); err != nil {
		t.Fatal(err)
	}
	score := f.rdb.ZScore(ctx, f.store.Keys().Deadlines(0), id).Val()
	parked := shard.Score(w.UntilMs, 0)
	if n, err := f.store.MoveHeld(ctx, 0, []shard.HeldMove{{ID: id, From: score,
		Record: shard.HeldRecord{Stage: shard.HeldParked, Score: parked, TimeoutMs: 30_000, Window: w.ID}}}); err != nil || n != 1 {
		t.Fatalf("hold %s: %d %v", id, n, err)
	}
}

// A device a window holds shows state maintenance and the window's id.
func TestDeviceGetShowsMaintenance(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.track(t, "d-1", "", time.Now().Add(-time.Second))
	holdByWindow(t, f, "d-1")
	r := run(t, f.env, "device", "get", "d-1")
	if r.code != 0 || !strings.Contains(r.stdout, "state:    maintenance") || !strings.Contains(r.stdout, "maintenance: w-held") {
		t.Fatalf("device get: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, f.env, "maintenance", "list", "-o", "json")
	var ws []inspect.WindowStatus
	if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != 1 || ws[0].Held != 1 {
		t.Fatalf("list: %+v %v (%q)", ws, err, r.stdout)
	}
}
