package faults_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/shard"
)

// TestKafkaOutage makes the broker fail flatline's produce requests (to the
// timeouts and dead-letter topics) for 10 s and every fetch request for
// 10 s, the fetch outage starting 2 s after the produce outage so that
// scanners meet due members they cannot publish. The devices keep writing
// heartbeats to the signals topic throughout (they stand for producers
// reaching the cluster through other brokers).
//
// During the produce outage the due members stay in their shards and
// dispatch retries with backoff; during the fetch outage ingest reads
// nothing, so the watermark holds every later deadline back. Afterwards
// every silent device gets its timeout, for its last heartbeat; no live
// device gets one; the process never exits.
func TestKafkaOutage(t *testing.T) {
	t.Parallel()
	const outage, stagger = 10 * time.Second, 2 * time.Second
	rng := seed(t)
	run := outageScenario.Start(t, func(cfg *configs.Config) { cfg.Kafka.SessionTimeout = 2 * time.Second })
	k, cfg, inst, events := run.Kafka, run.Cfg, run.Inst, run.Events
	timeout, shards := run.Timeout, run.Shards

	start := time.Now()
	produceDown := start.Add(4 * time.Second)
	fetchDown := produceDown.Add(stagger)
	produceUp, fetchUp := produceDown.Add(outage), fetchDown.Add(outage)
	f := run.StartFleet(t, "k-", run.Schedule(rng, start.Add(1500*time.Millisecond), fetchUp.Add(2*time.Second)))

	m := inst.Metrics
	time.Sleep(time.Until(produceDown))
	publishErrs0 := m.PublishErrorsTotal()
	published0 := testutil.ToFloat64(m.TimeoutsPublished)
	produce := k.Cluster().Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: e2etest.Timeouts, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: e2etest.DLQ, Count: -1},
	)
	t.Logf("produce fails from +%v", time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Until(fetchDown))
	fetch := k.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Count: -1})
	t.Logf("fetch fails from +%v", time.Since(start).Round(time.Millisecond))

	// Just before produce comes back: every silent device whose deadline
	// has passed and that was not published before the outage is still in
	// its shard.
	time.Sleep(time.Until(produceUp.Add(-500 * time.Millisecond)))
	if inst.Exited() {
		t.Fatalf("flatline exited during the Kafka outage: %v", inst.Err())
	}
	got := events.ByDevice()
	last := f.LastBeats()
	held := 0
	for _, id := range f.SilentIDs() {
		deadline := last[id] + timeout.Milliseconds()
		if len(got[id]) > 0 || deadline >= time.Now().UnixMilli() {
			continue
		}
		_, ok, err := inst.Store.Score(context.Background(), shard.Of(shard.Hash(id), shards), id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Errorf("%s: due at %d, not published, yet gone from its shard", id, deadline)
		}
		if deadline < fetchDown.UnixMilli() {
			held++ // due while the watermark could still pass it: dispatch was attempted
		}
	}
	publishErrs := m.PublishErrorsTotal() - publishErrs0
	if held == 0 || publishErrs == 0 {
		t.Errorf("no publish was attempted during the outage (%d due members held, %v publish errors): the test proves nothing", held, publishErrs)
	}
	// Backoff: 50ms doubling to 2s per batch in flight; a hot loop would
	// be thousands.
	if maxErrs := float64(shards*cfg.Scanner.MaxInflight) * outage.Seconds(); publishErrs > maxErrs {
		t.Errorf("%v failed publishes in %v: not backing off", publishErrs, outage)
	}
	if p := testutil.ToFloat64(m.TimeoutsPublished) - published0; p != 0 {
		t.Errorf("%v timeouts counted as published while every produce failed", p)
	}

	time.Sleep(time.Until(produceUp))
	produce.Remove()
	t.Logf("produce back at +%v (%d produce requests failed)", time.Since(start).Round(time.Millisecond), produce.Hits())
	time.Sleep(time.Until(fetchUp))
	fetch.Remove()
	t.Logf("fetch back at +%v (%d fetch requests failed; flatline logged %d \"fetch failed\" warnings)", time.Since(start).Round(time.Millisecond), fetch.Hits(), inst.Log.Count("fetch failed"))

	v := run.Finish(t, 30*time.Second, e2etest.ExactlyOnce)
	caught := v.AllFired.Sub(fetchUp)
	t.Logf("fleet: %d rounds, max heartbeat→next-ack %v; ", v.Rounds, v.MaxLag.Round(time.Millisecond))
	t.Logf("produce outage %v, fetch outage %v (staggered %v): %d due members held in their shards, %v publish retries; "+
		"all silent devices fired %v after fetch came back; %v",
		outage, outage, stagger, held, publishErrs, caught.Round(time.Millisecond), v)
}
