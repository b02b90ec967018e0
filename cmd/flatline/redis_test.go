package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// fleet is a redis-server holding a one-shard layout under its own prefix,
// and the environment that points the command line at it.
type fleet struct {
	store *shard.Store
	rdb   redis.UniversalClient
	env   []string
}

func newFleet(t *testing.T) fleet {
	t.Helper()
	store, srv := testenv.Store(t)
	ctx := context.Background()
	if _, err := store.SetLayout(ctx, 0, shard.Layout{Count: 1, SinceMs: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	return fleet{store: store, rdb: store.Client(), env: []string{
		"FLATLINE_REDIS_ADDRS=" + srv.Addr(),
		"FLATLINE_REDIS_KEY_PREFIX=" + store.Keys().Prefix(),
		"FLATLINE_TIMEOUTS_CLASSES=cam=30s",
	}}
}

// track makes device id tracked in shard 0 with deadline, in class (a name
// the registry already holds, or "").
func (f fleet) track(t *testing.T, id, class string, deadline time.Time) {
	t.Helper()
	f.add(t, f.store.Keys().Deadlines(0), class, map[string]time.Time{id: deadline})
}

// down makes the devices down in shard 0, each since its deadline, in
// class (as track's).
func (f fleet) down(t *testing.T, class string, deadlines map[string]time.Time) {
	t.Helper()
	f.add(t, f.store.Keys().Down(0), class, deadlines)
}

// add writes the devices to the sorted set key in one ZADD, each scored by
// its deadline and class.
func (f fleet) add(t *testing.T, key, class string, deadlines map[string]time.Time) {
	t.Helper()
	ctx := context.Background()
	classID := 0
	if class != "" {
		ids, err := f.store.RegisterClasses(ctx, []string{class})
		if err != nil {
			t.Fatal(err)
		}
		classID = ids[0]
	}
	zs := make([]redis.Z, 0, len(deadlines))
	for id, deadline := range deadlines {
		zs = append(zs, redis.Z{Score: shard.Score(deadline.UnixMilli(), shard.NewMeta(classID, 0)), Member: id})
	}
	if err := f.rdb.ZAdd(ctx, key, zs...).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestDeviceGetPrintsJSON(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	deadline := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	f.track(t, "d-1", "cam", deadline)
	for _, flag := range []string{"--json", "-o=json", "--output=json"} {
		r := run(t, f.env, "device", "get", "d-1", flag)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", flag, r.code, r.stderr)
		}
		var d inspect.Device
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", flag, err, r.stdout)
		}
		want := inspect.Device{DeviceID: "d-1", Tracked: true, DeadlineMs: deadline.UnixMilli(), TimeoutMs: 30000, Class: "cam", State: inspect.StateTracked}
		if d != want {
			t.Fatalf("%s: got %+v, want %+v", flag, d, want)
		}
	}
}

func TestShardsStatusPrintsJSON(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	f.track(t, "d-1", "", time.Now().Add(time.Minute))
	f.track(t, "d-2", "", time.Now().Add(time.Minute))
	for _, flag := range []string{"--json", "-o=json"} {
		r := run(t, f.env, "shards", "status", flag)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", flag, r.code, r.stderr)
		}
		var st inspect.Status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", flag, err, r.stdout)
		}
		if st.Layout.Count != 1 || st.Tracked != 2 {
			t.Fatalf("%s: got %+v", flag, st)
		}
		want := redisconn.Status{Mode: redisconn.ModeStandalone, MaxmemoryPolicy: "noeviction", Persistence: redisconn.PersistOff}
		if st.Redis == nil || *st.Redis != want {
			t.Errorf("%s: redis %+v, want %+v", flag, st.Redis, want)
		}
	}
	if r := run(t, f.env, "shards", "status"); r.code != 0 || !strings.Contains(r.stdout, "tracked devices: 2") ||
		!strings.Contains(r.stdout, "redis: standalone, maxmemory-policy noeviction, persistence off, 0 replicas") {
		t.Fatalf("text: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
