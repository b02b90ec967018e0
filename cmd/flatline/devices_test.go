package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/httpapi"
)

// devicesDown runs `flatline devices down` with args and -o json against
// the fleet, and returns the listing it printed.
func (f fleet) devicesDown(t *testing.T, args ...string) inspect.DownList {
	t.Helper()
	r := run(t, f.env, append(append([]string{"devices", "down"}, args...), "-o", "json")...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("devices down %v: exit %d, stderr %q", args, r.code, r.stderr)
	}
	var list inspect.DownList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("devices down %v: not JSON: %v\n%s", args, err, r.stdout)
	}
	return list
}

func TestDevicesDownListsTheTimedOut(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	since := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	f.down(t, "cam", map[string]time.Time{"d-cam": since})
	f.down(t, "", map[string]time.Time{"d-plain": since})
	list := f.devicesDown(t, "--class", "cam")
	if len(list.Devices) != 1 || list.Truncated {
		t.Fatalf("got %+v", list)
	}
	d := list.Devices[0]
	if d.DeviceID != "d-cam" || d.Class != "cam" || d.DeadlineMs != since.UnixMilli() || d.DownForMs < time.Hour.Milliseconds() {
		t.Fatalf("got %+v", d)
	}

	r := run(t, f.env, "devices", "down", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "DOWN FOR") || !strings.Contains(r.stdout, "(the first 1 found; --limit 0 lists all)") {
		t.Fatalf("text: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, f.env, "devices", "down", "--limit", "-1"); r.code == 0 || !strings.Contains(r.stderr, "--limit: must not be negative") {
		t.Fatalf("--limit -1: exit %d, stderr %q", r.code, r.stderr)
	}
}

// `flatline devices down` follows the listing's cursor past a page of
// GET /devices/down's largest limit: it prints every device down (--limit
// 0) or as many as --limit asks, each once, longest down first.
func TestDevicesDownFollowsTheCursor(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	const n = httpapi.DevicesDownMaxLimit + 50
	since := time.Now().Add(-time.Hour)
	down := make(map[string]time.Time, n)
	for k := range n {
		// Some share a deadline, as in a mass expiry.
		down[fmt.Sprintf("d-%05d", k)] = since.Add(time.Duration(k/3) * time.Millisecond)
	}
	f.down(t, "", down)
	for _, tc := range []struct {
		limit     int
		want      int
		truncated bool
	}{
		{0, n, false},
		{n - 20, n - 20, true},
		{n, n, false},
	} {
		list := f.devicesDown(t, "--limit", fmt.Sprint(tc.limit))
		if len(list.Devices) != tc.want || list.Truncated != tc.truncated || (list.Next != "") != tc.truncated {
			t.Fatalf("--limit %d: %d devices, truncated %v, next %q; want %d, %v", tc.limit, len(list.Devices), list.Truncated, list.Next, tc.want, tc.truncated)
		}
		seen := make(map[string]bool, len(list.Devices))
		for k, d := range list.Devices {
			if seen[d.DeviceID] {
				t.Fatalf("--limit %d: %s printed twice", tc.limit, d.DeviceID)
			}
			seen[d.DeviceID] = true
			if k > 0 && d.DeadlineMs < list.Devices[k-1].DeadlineMs {
				t.Fatalf("--limit %d: %s printed after %s, which is down for less", tc.limit, d.DeviceID, list.Devices[k-1].DeviceID)
			}
		}
	}
}
