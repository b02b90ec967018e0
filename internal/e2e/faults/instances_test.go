package faults_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/shard"
)

// TestThreeInstancesKill9 runs three real `flatline serve` processes on one
// Redis and Kafka with 10,000 devices, 300 of which go silent at random
// moments, and kills one with SIGKILL mid-run. Every silent device gets its
// timeout (duplicates across the kill are counted, each with its original's
// event_id), no live device gets one, and the time until every shard has a
// live owner again is measured: within scanner.lease_ttl + 1 s.
func TestThreeInstancesKill9(t *testing.T) {
	t.Parallel()
	const (
		devices    = 10000
		silent     = 300
		interval   = time.Second
		timeout    = 3 * time.Second
		partitions = 8
		shards     = 16
		leaseTTL   = 2 * time.Second
	)
	rng := seed(t)
	bin := flatlineBinary(t)
	e := e2etest.NewEnv(t, partitions)
	k := e.Kafka
	logs := e2etest.NewLogBuffer(3000)
	logs.DumpOnFailure(t, "flatline serve ×3")
	reap := reapGhosts(t, k.Brokers(), e.Cfg.Kafka.GroupID, 2*time.Second)
	envFor := func(id string) []string {
		return serveEnv(e.Cfg, map[string]string{
			"FLATLINE_INSTANCE_ID":           id,
			"FLATLINE_KAFKA_SESSION_TIMEOUT": "2s",
			"FLATLINE_SCANNER_LEASE_TTL":     leaseTTL.String(),
			"FLATLINE_TIMEOUTS_DEFAULT":      timeout.String(),
			"FLATLINE_SHARDS_INITIAL_COUNT":  strconv.Itoa(shards),
		})
	}
	ids := []string{"inst-a", "inst-b", "inst-c"}
	procs := map[string]*proc{}
	for _, id := range ids {
		procs[id] = startProc(t, bin, envFor(id), logs, "serve")
	}
	store := shard.NewStore(e.Redis.Client(t), shard.NewKeys(e.Cfg.Redis.KeyPrefix))
	ctx := context.Background()
	owners := func() []string {
		o, err := store.LeaseOwners(ctx, shards)
		if err != nil {
			return nil
		}
		return o
	}
	e2etest.Eventually(t, 30*time.Second, "every shard owned, by all three instances", func() bool {
		o := owners()
		seen := map[string]bool{}
		for _, id := range o {
			if id == "" {
				return false
			}
			seen[id] = true
		}
		return len(seen) == 3
	})

	start := time.Now()
	silenceFrom, silenceTo := start.Add(3*time.Second), start.Add(12*time.Second)
	f := e2etest.StartFleet(t, k.Brokers(), e2etest.IDs("dev-", devices), interval,
		e2etest.SilentSchedule(rng, devices, silent, silenceFrom, silenceTo))
	events := e2etest.Collect(t, k.Brokers(), e2etest.Timeouts, partitions)

	// Kill one instance in the middle of the silences.
	victim := ids[rng.IntN(len(ids))]
	time.Sleep(time.Until(silenceFrom.Add(silenceTo.Sub(silenceFrom) / 2)))
	var orphaned []int
	for i, o := range owners() {
		if o == victim {
			orphaned = append(orphaned, i)
		}
	}
	procs[victim].kill()
	killedAt := time.Now()
	t.Logf("kill -9 %s at +%v; it owned shards %v", victim, killedAt.Sub(start).Round(time.Millisecond), orphaned)
	e2etest.Eventually(t, 3*leaseTTL, "every shard owned by a live instance again", func() bool {
		for _, o := range owners() {
			if o == "" || o == victim {
				return false
			}
		}
		return true
	})
	takeover := time.Since(killedAt)
	t.Logf("every shard has a live owner again %v after the kill (lease_ttl %v)", takeover.Round(time.Millisecond), leaseTTL)
	if takeover > leaseTTL+time.Second {
		t.Errorf("takeover took %v, want ≤ lease_ttl + 1s = %v", takeover, leaseTTL+time.Second)
	}

	e2etest.Eventually(t, 60*time.Second, "a timeout for every silent device", func() bool {
		return f.Fired(events) == silent
	})
	time.Sleep(2 * time.Second) // late duplicates or false timeouts would show here
	for _, id := range ids {
		if id != victim {
			if code := procs[id].terminate(10 * time.Second); code != 0 {
				t.Errorf("%s exited with %d on SIGTERM, want 0", id, code)
			}
		}
	}
	f.Stop()
	ghosts := reap()
	events.Drain(t)
	v := f.Verdict(t, events, e2etest.Want{Timeout: timeout, Shards: shards, Delivery: e2etest.AtLeastOnce})
	survivors := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == victim })
	t.Logf("3 instances (%v survived), %d devices, %d kfake ghost members removed: %v", survivors, devices, ghosts, v)
}
