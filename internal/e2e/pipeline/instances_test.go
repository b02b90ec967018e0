package pipeline_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/inspect"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/shard"
)

// With 3 instances and 16 shards each owns 5 or 6 within two lease periods;
// with one left, it owns all 16.
func TestLeasesSpreadEvenly(t *testing.T) {
	t.Parallel()
	e := e2etest.NewEnv(t, 4)
	e.Cfg.Shards.InitialCount = 16
	e.Cfg.Scanner.LeaseTTL = 2 * time.Second
	e.Cfg.Kafka.SessionTimeout = 2 * time.Second
	var insts []*e2etest.Instance
	for k := 0; k < 3; k++ {
		cfg := e.Cfg
		cfg.InstanceID = fmt.Sprintf("inst-%d", k)
		insts = append(insts, e2etest.Start(t, cfg, app.Hooks{}))
	}
	balanced := func() bool {
		total := 0
		for _, in := range insts {
			n := len(in.Leaser.Owned())
			if n < 5 || n > 6 {
				return false
			}
			total += n
		}
		return total == 16
	}
	took := e2etest.Eventually(t, 2*e.Cfg.Scanner.LeaseTTL, "the shards spread 5/6 over 3 instances", balanced)
	t.Logf("3 instances balanced after %s: %d/%d/%d", took, len(insts[0].Leaser.Owned()), len(insts[1].Leaser.Owned()), len(insts[2].Leaser.Owned()))
	// Every shard has exactly one owner.
	st, err := inspect.ReadStatus(t.Context(), insts[0].Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Shards {
		if s.Owner == "" {
			t.Errorf("shard %d has no owner", s.Shard)
		}
	}
	for _, in := range insts[1:] {
		if err := in.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	took = e2etest.Eventually(t, 2*e.Cfg.Scanner.LeaseTTL, "the last instance to own all 16 shards", func() bool {
		return len(insts[0].Leaser.Owned()) == 16
	})
	t.Logf("last instance owns all 16 after %s", took)
}

// A live scanner whose signals have no ingest at all fires nothing, however
// overdue its devices look, and reports the stalled watermark.
func TestNoIngestFiresNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, 4)
	// First an instance with ingest tracks a fleet, then goes away.
	ids := e2etest.IDs("orphan-", 200)
	a := e2etest.Start(t, e.Cfg, app.Hooks{})
	f := e2etest.StartFleet(t, e.Kafka.Brokers(), ids, 200*time.Millisecond, make([]time.Time, len(ids)))
	// Tracked, and every partition's watermark written: an instance that
	// stopped before its first raise left no watermark to lag behind.
	e2etest.Eventually(t, 20*time.Second, "the fleet tracked and every partition's watermark written", func() bool {
		n, err := a.Store.Tracked(t.Context(), 4)
		if err != nil || n != int64(len(ids)) {
			return false
		}
		wms, parts, err := a.Store.Watermarks(t.Context())
		_, ok := shard.MinWatermark(wms, parts)
		return err == nil && ok
	})
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	f.Stop() // every device is now silent: deadlines pass in ≤ 1 s

	cfg := e.Cfg
	cfg.Roles = []string{configs.RoleScanner}
	b := e2etest.Start(t, cfg, app.Hooks{})
	events := e2etest.Collect(t, e.Kafka.Brokers(), e2etest.Timeouts, 4)
	e2etest.Eventually(t, 15*time.Second, "the scanner-only instance to report a stalled watermark", b.Gate.Stalled)
	st, err := inspect.ReadStatus(t.Context(), b.Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Tracked != int64(len(ids)) || st.WatermarkLagMs < 2000 {
		t.Errorf("status: tracked %d, watermark lag %d ms; want %d tracked and a lag over 2 s", st.Tracked, st.WatermarkLagMs, len(ids))
	}
	if n := testutil.ToFloat64(b.Metrics.TimeoutsPublished); n != 0 || events.Unread() != 0 {
		t.Errorf("published %v timeouts (%d read back) without any ingest", n, events.Unread())
	}
	if len(b.Leaser.Owned()) != 4 {
		t.Errorf("the scanner owns %d of 4 shards", len(b.Leaser.Owned()))
	}
	t.Logf("stalled watermark reported with lag %s; %d devices overdue, none fired", time.Duration(st.WatermarkLagMs)*time.Millisecond, st.Tracked)
}

// Devices keep beating while every instance is stopped for 3× the timeout;
// after the restart none of them times out, and the devices that really
// went silent during the gap get theirs once ingest has caught up.
func TestRestartAfterGapNoFalseTimeouts(t *testing.T) {
	t.Parallel()
	// 2,000 devices beating every 200 ms with a 1 s timeout, 100 going
	// silent, on 4 partitions and 8 shards.
	run := e2etest.Scenario{Devices: 2000}.Start(t, nil)

	gapStart := time.Now().Add(2 * time.Second)
	gap := 3 * run.Timeout
	// Silent only during the gap, when nobody is watching.
	f := run.StartFleet(t, "gap-", run.Schedule(rand.New(rand.NewPCG(8, 9)), gapStart, gapStart.Add(gap-500*time.Millisecond)))
	time.Sleep(time.Until(gapStart))
	if err := run.Inst.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gap) // the fleet beats on into Kafka; no flatline runs
	b := e2etest.Start(t, run.Cfg, app.Hooks{})

	f.Finish(t, run.Events, 60*time.Second, run.Want(e2etest.ExactlyOnce), b)
}
