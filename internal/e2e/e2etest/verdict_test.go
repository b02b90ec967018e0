package e2etest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/dispatch"
)

// errRecorder is a testing.TB that keeps what Verdict reports instead of
// failing the test that runs it.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Helper()                   {}
func (r *errRecorder) Logf(string, ...any)       {}
func (r *errRecorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *errRecorder) Fatalf(f string, a ...any) {
	r.errs = append(r.errs, "fatal: "+fmt.Sprintf(f, a...))
}

// stalledFleet is a fleet of three devices with a 1 s timeout whose rounds
// went out every 200 ms from t0, the round made at t0+400ms acknowledged
// only at t0+1500ms: a stall at the deadline t0+1200ms of the round before.
// live beats throughout; silent goes silent at t0+1700ms (it beat in the
// late round); early went silent at t0+300ms (its last heartbeat was the
// round at t0+200ms, its deadline the stall's).
func stalledFleet(t0 time.Time) *Fleet {
	ms := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	return &Fleet{
		IDs:      []string{"live", "silent", "early"},
		silentAt: []time.Time{{}, ms(1700), ms(300)},
		last:     map[string]int64{"silent": ms(1600).UnixMilli(), "early": ms(200).UnixMilli()},
		acked: []round{
			{ms(0), ms(10)}, {ms(200), ms(210)}, {ms(400), ms(1500)},
			{ms(1500), ms(1510)}, {ms(1600), ms(1610)}, {ms(1800), ms(1810)},
		},
	}
}

func timeoutAt(id string, lastMs int64) Received {
	d := lastMs + 1000
	return Received{Key: id, Ev: dispatch.Event{
		Type: dispatch.TypeTimeout, DeviceID: id, LastSeenMs: lastMs, DeadlineMs: d, DetectedAtMs: d + 20,
		TimeoutMs: 1000, EventID: fmt.Sprintf("%s/%d", id, d),
	}, At: time.UnixMilli(d + 30)}
}

func recoveredFrom(id string, downSinceMs, seenMs int64) Received {
	return Received{Key: id, Ev: dispatch.Event{
		Type: dispatch.TypeRecovered, DeviceID: id, DownSinceMs: downSinceMs, SeenAtMs: seenMs,
	}}
}

// A round Kafka acknowledged only after the deadline the round before set
// makes a timeout at that deadline, and the recovery that ends it, right
// for the devices that beat in the late round, and for no other; every
// other timeout is judged as before.
func TestVerdictExcusesTheFleetsOwnStalls(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	at := func(d int) int64 { return t0.Add(time.Duration(d) * time.Millisecond).UnixMilli() }
	want := Want{Timeout: time.Second, Shards: 16}

	stallEvents := []Received{
		timeoutAt("live", at(200)), recoveredFrom("live", at(1200), at(400)),
		timeoutAt("silent", at(200)), recoveredFrom("silent", at(1200), at(400)),
		timeoutAt("silent", at(1600)),
		timeoutAt("early", at(200)), // its own silence, at the stall's deadline
	}
	t.Run("stall", func(t *testing.T) {
		rec := &errRecorder{TB: t}
		v := stalledFleet(t0).Verdict(rec, &Collector{events: stallEvents}, want)
		if len(rec.errs) > 0 {
			t.Fatalf("events at the fleet's stall judged wrong:\n%s", strings.Join(rec.errs, "\n"))
		}
		if v.Excused != 4 || v.ExcusedDevices != 2 || v.Fired != 2 || v.Duplicates != 0 {
			t.Fatalf("verdict %+v: want 4 events of 2 devices excused, 2 silent devices fired once", v)
		}
		// Until silent's own timeout is read, the stall's does not count
		// as it having fired.
		if err := Unfired(&Collector{events: stallEvents[:4]}, []string{"silent"}, map[string]int64{"silent": at(1600)}, nil); err == nil {
			t.Fatal("Unfired took the stall's timeout for the silent device's own")
		}
		if err := Unfired(&Collector{events: stallEvents}, []string{"silent"}, map[string]int64{"silent": at(1600)}, nil); err != nil {
			t.Fatalf("Unfired: %v", err)
		}
	})

	for _, tc := range []struct {
		name string
		ev   Received
		f    func(*Fleet)
	}{
		{"live device at no stall", timeoutAt("live", at(1500)), nil},
		{"a device silent by the late round", recoveredFrom("early", at(1200), at(400)), nil},
		{"a stall the fleet did not have", timeoutAt("live", at(200)), func(f *Fleet) { f.acked[2].ack = f.acked[2].at.Add(10 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := stalledFleet(t0)
			if tc.f != nil {
				tc.f(f)
			}
			events := append([]Received{tc.ev}, timeoutAt("silent", at(1600)), timeoutAt("early", at(200)))
			rec := &errRecorder{TB: t}
			f.Verdict(rec, &Collector{events: events}, want)
			if len(rec.errs) == 0 {
				t.Fatalf("%+v passed", tc.ev.Ev)
			}
		})
	}
}
