package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// TestDevicesDownEndpointAnswersAsTheCommand: devices that time out are
// listed by GET /devices/down as `flatline devices down -o json` lists them
// (inspect.ListDown over the policy the command reads), with the
// command's --class and --limit as query options, and counted by
// flatline_devices_down{class, state} and /status.
func TestDevicesDownEndpointAnswersAsTheCommand(t *testing.T) {
	const live, cams, plain = 20, 6, 4
	in := startInstanceWith(t, 4, func(c *configs.Config) {
		c.Timeouts.Classes = map[string]time.Duration{"cam": time.Second, "gateway": time.Hour}
	})
	var msgs []heartbeat
	msgs = append(msgs, heartbeats("live-", live, 0)...)
	for _, h := range heartbeats("cam-", cams, 0) {
		h.class = "cam"
		msgs = append(msgs, h)
	}
	msgs = append(msgs, heartbeats("plain-", plain, 1000)...)
	in.send(t, msgs)
	e2etest.EventuallyNil(t, 20*time.Second, "the silent devices down", func() error {
		if st := in.status(t); st.Down != cams+plain || st.Tracked != live {
			return fmt.Errorf("/status: %d down, %d tracked; want %d and %d", st.Down, st.Tracked, cams+plain, live)
		}
		return nil
	})

	get := func(query string) inspect.DownList {
		t.Helper()
		var l inspect.DownList
		if err := json.Unmarshal(in.get(t, "/devices/down"+query), &l); err != nil {
			t.Fatalf("GET /devices/down%s: %v", query, err)
		}
		return l
	}
	// What the command prints for the same options (its -o json is this
	// document), less down_for_ms, which moves with the clock.
	command := func(class string, limit int) inspect.DownList {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		policy, err := app.ReadPolicy(ctx, in.Store, in.cfg.Timeouts)
		if err != nil {
			t.Fatal(err)
		}
		l, err := inspect.ListDown(ctx, in.Store, policy, inspect.DownQuery{
			Class: class, Limit: limit, Window: in.cfg.Dispatch.RecoveryWindow, Pad: in.cfg.Ingest.CoalesceWindow,
		}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	same := func(what string, got, want inspect.DownList) {
		t.Helper()
		strip := func(l inspect.DownList) string {
			l.Devices = slices.Clone(l.Devices)
			for i := range l.Devices {
				l.Devices[i].DownForMs = 0
			}
			return fmt.Sprintf("%+v", l)
		}
		if strip(got) != strip(want) {
			t.Errorf("%s:\n got %s\nwant %s", what, strip(got), strip(want))
		}
	}

	all := get("")
	if len(all.Devices) != cams+plain || all.Truncated {
		t.Fatalf("GET /devices/down: %d devices (truncated %v), want %d", len(all.Devices), all.Truncated, cams+plain)
	}
	same("GET /devices/down", all, command("", 1000))
	for _, d := range all.Devices {
		if want := map[bool]string{true: "cam", false: ""}[strings.HasPrefix(d.DeviceID, "cam-")]; d.Class != want || d.DownForMs <= 0 {
			t.Errorf("%+v: want class %q and a positive down_for_ms", d, want)
		}
	}
	cam := get("?class=cam")
	same("GET /devices/down?class=cam", cam, command("cam", 1000))
	if len(cam.Devices) != cams {
		t.Errorf("?class=cam: %d devices, want %d", len(cam.Devices), cams)
	}
	if l := get("?limit=3"); len(l.Devices) != 3 || !l.Truncated {
		t.Errorf("?limit=3: %d devices, truncated %v; want 3, true", len(l.Devices), l.Truncated)
	}

	m := in.metrics(t)
	for _, s := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"flatline_devices_down", []string{"class", "cam", "state", "timed_out"}, cams},
		{"flatline_devices_down", []string{"class", "", "state", "timed_out"}, plain},
		{"flatline_devices_down", []string{"class", "gateway", "state", "timed_out"}, 0},
		{"flatline_devices_down", []string{"class", "cam", "state", "unreachable"}, 0},
		{"flatline_devices_tracked", nil, live},
	} {
		if got, ok := m.Value(s.name, s.labels...); !ok || got != s.want {
			t.Errorf("%s%q = %v (present %v), want %v", s.name, s.labels, got, ok, s.want)
		}
	}
}

// TestRedisGaugesAreAbsentWhileRedisIsDown: the gauges read from Redis at
// scrape time vanish from /metrics while Redis is down (they would
// otherwise show the last values as current), flatline_cluster_state_up
// says why, and they are back with Redis.
func TestRedisGaugesAreAbsentWhileRedisIsDown(t *testing.T) {
	const shards, live = 4, 30
	// Persistence keeps the devices and the layout across the restart.
	in := startInstanceWith(t, shards, nil, "--appendonly", "yes")
	in.send(t, heartbeats("live-", live, 0))
	fromRedis := []string{
		"flatline_layout_shards", "flatline_layout_previous_shards", "flatline_shard_devices",
		"flatline_shard_due_backlog", "flatline_devices_tracked", "flatline_devices_down",
		"flatline_watermark_timestamp_seconds", "flatline_watermark_lag_seconds",
	}
	present := func(m e2etest.Metrics) []string {
		var out []string
		for _, name := range fromRedis {
			if m.Samples(name) > 0 {
				out = append(out, name)
			}
		}
		return out
	}
	up := func(want float64) func() error {
		return func() error {
			m := in.metrics(t)
			if v, ok := m.Value("flatline_cluster_state_up"); !ok || v != want {
				return fmt.Errorf("flatline_cluster_state_up = %v (present %v), want %v", v, ok, want)
			}
			got := present(m)
			if want == 1 {
				if tracked, _ := m.Value("flatline_devices_tracked"); tracked != live || !slices.Equal(got, fromRedis) {
					return fmt.Errorf("tracked %v, want %d; present %v, want %v", tracked, live, got, fromRedis)
				}
			} else if len(got) > 0 {
				return fmt.Errorf("with Redis down, /metrics still has %v", got)
			}
			return nil
		}
	}
	e2etest.EventuallyNil(t, 20*time.Second, "the fleet tracked, every gauge read from Redis exported", up(1))

	in.env.Redis.Stop()
	e2etest.EventuallyNil(t, 20*time.Second, "the gauges read from Redis gone with it", up(0))

	in.env.Redis.Start()
	e2etest.EventuallyNil(t, 30*time.Second, "the gauges back with Redis", up(1))
}
