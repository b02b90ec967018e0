package sentinel_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const partitions = 4

// TestFailoverThroughSentinels runs an instance with redis.mode sentinel
// (Sentinels and data nodes each with their own password) while a fleet
// beats: a first group of devices goes silent and times out, the primary
// is killed -9, the Sentinels promote the replica, and a second group that
// goes silent after that times out too, with the last heartbeat flatline
// wrote to the promoted primary. No live device times out. A repeat of a
// timeout carries the original's event_id (without redis.wait_replicas a
// failover may lose the removal of a fired member).
func TestFailoverThroughSentinels(t *testing.T) {
	t.Parallel()
	const dataPW, sentinelPW = "data-Pw-e2e", "sentinel-Pw-e2e"
	s := testenv.RedisSentinel(t, testenv.SentinelOptions{Password: dataPW, SentinelPassword: sentinelPW})
	// 400 devices beating every 200 ms with a 1 s timeout, on 8 shards.
	run := e2etest.Scenario{Devices: 400, Partitions: partitions, Shards: 8}.StartOnRedis(t, s.Addrs(), func(cfg *configs.Config) {
		cfg.Redis.Mode = redisconn.ModeSentinel
		cfg.Redis.Sentinel.Master = s.Master()
		cfg.Redis.Password = dataPW
		cfg.Redis.Sentinel.Password = sentinelPW
		cfg.HTTP.Addr = "127.0.0.1:0"
	})
	inst, events, devices := run.Inst, run.Events, run.Devices
	// readStatus is /status's redis object; an error right after the
	// failover (a pooled connection to the dead primary) is retried by
	// the callers that wait for it.
	readStatus := func() (redisconn.Status, error) {
		body, err := e2etest.HTTPGet("http://" + inst.HTTP.Addr() + "/status")
		if err != nil {
			return redisconn.Status{}, err
		}
		var st struct {
			Redis redisconn.Status `json:"redis"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return redisconn.Status{}, fmt.Errorf("decode /status: %w", err)
		}
		return st.Redis, nil
	}
	status := func() redisconn.Status {
		t.Helper()
		st, err := readStatus()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// Group A goes silent 2 s in; group B well after the failover that
	// follows A's timeouts (which takes about 2 s).
	start := time.Now()
	ids := e2etest.IDs("sen-", devices)
	silentAt := make([]time.Time, devices)
	var groupA, groupB []string
	for i := 0; i < devices; i += 20 {
		silentAt[i] = start.Add(2 * time.Second)
		groupA = append(groupA, ids[i])
		silentAt[i+10] = start.Add(12 * time.Second)
		groupB = append(groupB, ids[i+10])
	}
	run.StartFleet(t, "sen-", silentAt)

	old := s.Primary()
	if n, err := old.Client(t).DBSize(testenv.Context(t, 5*time.Second)).Result(); err != nil || n == 0 {
		t.Errorf("the primary %s holds %d keys (%v): flatline's writes do not reach it", old.Addr(), n, err)
	}
	if st := status(); st.Mode != redisconn.ModeSentinel || st.Replicas != 1 {
		t.Errorf("/status redis %+v before the failover; want mode sentinel, 1 replica", st)
	}
	e2etest.Eventually(t, 20*time.Second, "group A's timeouts", func() bool { return events.CountDevices(groupA) == len(groupA) })

	killed := time.Now()
	old.Kill()
	promoted := s.WaitFailover(old, 30*time.Second)
	took := time.Since(killed)
	inst.Log.Note("test: killed primary %s; %s promoted %v later", old.Addr(), promoted.Addr(), took.Round(time.Millisecond))
	t.Logf("primary %s killed -9; the Sentinels promoted %s %v later", old.Addr(), promoted.Addr(), took.Round(time.Millisecond))
	if time.Now().After(silentAt[10]) {
		t.Logf("the failover ended after group B went silent: group B does not show work after it")
	}
	e2etest.EventuallyNil(t, 20*time.Second, "/status to show the promoted primary", func() error {
		st, err := readStatus()
		if err != nil {
			return err
		}
		if st.Mode != redisconn.ModeSentinel || st.Replicas != 0 || st.Error != "" {
			return fmt.Errorf("/status redis %+v; want mode sentinel, 0 replicas (the old primary is dead)", st)
		}
		return nil
	})

	v := run.Finish(t, 45*time.Second, e2etest.AtLeastOnce)
	t.Logf("%v", v)
}
