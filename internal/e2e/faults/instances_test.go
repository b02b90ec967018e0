package faults_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestThreeInstancesKill9 runs three real `flatline serve` processes on one
// Redis and Kafka with 10,000 devices, 300 of which go silent at random
// moments, and kills one with SIGKILL mid-run. Every silent device gets its
// timeout (duplicates across the kill are counted, each with its original's
// event_id), no live device gets one, and the time until every shard has a
// live owner again is measured: within scanner.lease_ttl + 1 s.
func TestThreeInstancesKill9(t *testing.T) {
	t.Parallel()
	const leaseTTL = 2 * time.Second
	rng := seed(t)
	r := newServeRig(t, e2etest.Scenario{
		Devices: 10000, Silent: 300, Interval: time.Second, Timeout: 3 * time.Second, Partitions: 8, Shards: 16,
	}, 3000, "flatline serve ×3")
	devices, shards := r.Devices, r.Shards
	reap := reapGhosts(t, r.Kafka.Brokers(), r.Cfg.Kafka.GroupID, 2*time.Second)
	envFor := func(id string) []string {
		return r.env(map[string]string{
			"FLATLINE_INSTANCE_ID":           id,
			"FLATLINE_KAFKA_SESSION_TIMEOUT": "2s",
			"FLATLINE_SCANNER_LEASE_TTL":     leaseTTL.String(),
		})
	}
	ids := []string{"inst-a", "inst-b", "inst-c"}
	procs := map[string]*testenv.Process{}
	for _, id := range ids {
		procs[id] = startProc(t, r.bin, envFor(id), r.logs, "serve")
	}
	store := r.store(t)
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
	f := r.startFleet(t, rng, "dev-", silenceFrom, silenceTo)

	// Kill one instance in the middle of the silences.
	victim := ids[rng.IntN(len(ids))]
	time.Sleep(time.Until(silenceFrom.Add(silenceTo.Sub(silenceFrom) / 2)))
	var orphaned []int
	for i, o := range owners() {
		if o == victim {
			orphaned = append(orphaned, i)
		}
	}
	procs[victim].Kill()
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

	e2etest.Eventually(t, 60*time.Second, "a timeout for every silent device", r.allFired)
	time.Sleep(2 * time.Second) // late duplicates or false timeouts would show here
	for _, id := range ids {
		if id != victim {
			if code, _ := procs[id].Stop(10 * time.Second); code != 0 {
				t.Errorf("%s exited with %d on SIGTERM, want 0", id, code)
			}
		}
	}
	f.Stop()
	ghosts := reap()
	v := r.verdict(t)
	survivors := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == victim })
	t.Logf("3 instances (%v survived), %d devices, %d kfake ghost members removed: %v", survivors, devices, ghosts, v)
}
