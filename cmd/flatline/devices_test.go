package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/shard"
)

// `flatline devices down` follows the listing's cursor past a page of
// GET /devices/down's largest limit: it prints every device down (--limit
// 0) or as many as --limit asks, each once, longest down first.
func TestDevicesDownFollowsTheCursor(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	ctx := context.Background()
	const n = httpapi.DevicesDownMaxLimit + 50
	since := time.Now().Add(-time.Hour).UnixMilli()
	zs := make([]redis.Z, n)
	for k := range zs {
		// Some share a deadline, as in a mass expiry.
		zs[k] = redis.Z{Score: shard.Score(since+int64(k/3), 0), Member: fmt.Sprintf("d-%05d", k)}
	}
	if err := f.rdb.ZAdd(ctx, f.store.Keys().Down(0), zs...).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit     int
		want      int
		truncated bool
	}{
		{0, n, false},
		{n - 20, n - 20, true},
		{n, n, false},
	} {
		r := run(t, f.env, "devices", "down", "--limit", fmt.Sprint(tc.limit), "-o", "json")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("--limit %d: exit %d, stderr %q", tc.limit, r.code, r.stderr)
		}
		var list inspect.DownList
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatalf("--limit %d: not JSON: %v", tc.limit, err)
		}
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
