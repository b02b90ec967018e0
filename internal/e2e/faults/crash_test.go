package faults_test

import (
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// TestCrashKill9 kills a real `flatline serve` process with SIGKILL three
// times at random moments while 5,000 devices beat and 10% of them go
// silent at random times, restarting it each time. Every silent device gets
// at least one timeout, for its last heartbeat; no live device gets one;
// every duplicate (at-least-once delivery across a crash) carries the
// original's event_id. Duplicates are counted in the log.
func TestCrashKill9(t *testing.T) {
	t.Parallel()
	const kills = 3
	rng := seed(t)
	r := newServeRig(t, e2etest.Scenario{
		Devices: 5000, Silent: 500, Interval: time.Second, Timeout: 4 * time.Second, Partitions: 8, Shards: 16,
	}, 3000, "flatline serve")
	bin, logs := r.bin, r.logs
	env := r.env(map[string]string{
		"FLATLINE_KAFKA_SESSION_TIMEOUT":    "2s",
		"FLATLINE_SCANNER_LEASE_TTL":        "1s",
		"FLATLINE_SHUTDOWN_TIMEOUT":         "5s",
		"FLATLINE_INGEST_PROBE_INTERVAL":    "20ms",
		"FLATLINE_DISPATCH_RECOVERY_WINDOW": "1h",
	})

	// kfake never expires a member killed while joining; see reapGhosts.
	reap := reapGhosts(t, r.Kafka.Brokers(), r.Cfg.Kafka.GroupID, 2*time.Second)

	run := 1
	logs.Note("start run %d", run)
	p := startProc(t, bin, env, logs, "serve")

	// The fleet beats from now on; silences start once it is tracked and
	// spread over the window in which the kills happen.
	start := time.Now()
	silenceFrom, silenceTo := start.Add(3*time.Second), start.Add(15*time.Second)
	f := r.startFleet(t, rng, "dev-", silenceFrom, silenceTo)

	// One kill at a random moment in each third of the silence window.
	seg := silenceTo.Sub(silenceFrom) / kills
	for i := 0; i < kills; i++ {
		at := silenceFrom.Add(time.Duration(i)*seg + time.Duration(rng.Int64N(int64(seg))))
		time.Sleep(time.Until(at))
		if p.Exited() {
			t.Fatalf("flatline exited on its own before kill %d: %v", i+1, p.State())
		}
		p.Kill()
		down := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		t.Logf("kill -9 #%d at +%v (run %d); restarting after %v", i+1, time.Since(start).Round(time.Millisecond), run, down.Round(time.Millisecond))
		logs.Note("killed at +%v", time.Since(start).Round(time.Millisecond))
		time.Sleep(down)
		run++
		logs.Note("start run %d", run)
		p = startProc(t, bin, env, logs, "serve")
	}

	e2etest.Eventually(t, 45*time.Second, "a timeout for every silent device", func() bool {
		if p.Exited() {
			t.Fatalf("flatline exited on its own: %v", p.State())
		}
		return r.allFired()
	})
	t.Logf("every silent device fired by +%v", time.Since(start).Round(time.Millisecond))
	// Keep the fleet beating a while longer to catch late duplicates and
	// false timeouts.
	time.Sleep(2 * time.Second)

	// Stop flatline before the heartbeats, or every device would time out.
	if code, _ := p.Stop(10 * time.Second); code != 0 {
		t.Errorf("flatline serve exited with %d on SIGTERM, want 0", code)
	}
	f.Stop()
	ghosts := reap()
	v := r.verdict(t)
	t.Logf("%d kills, %d runs, %d heartbeat rounds (max heartbeat→next-ack %v), %d kfake ghost members removed: %v",
		kills, run, v.Rounds, v.MaxLag.Round(time.Millisecond), ghosts, v)
	if v.Duplicates > 0 {
		t.Logf("duplicates: %d timeout events repeated across the kills, each with its original's event_id (at-least-once)", v.Duplicates)
		shown := 0
		for id, evs := range r.events.ByDevice() {
			if len(evs) < 2 || shown == 5 {
				continue
			}
			shown++
			line := id + ": deadline +" + time.UnixMilli(evs[0].Ev.DeadlineMs).Sub(start).Round(time.Millisecond).String() + ", detected at"
			for _, r := range evs {
				line += " +" + time.UnixMilli(r.Ev.DetectedAtMs).Sub(start).Round(time.Millisecond).String()
			}
			t.Log(line)
		}
	}
}
