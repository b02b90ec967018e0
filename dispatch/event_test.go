package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// The wire formats as encoding/json would write them, field by field in
// The documented order: the reference the hand-written encoder must match byte for byte.
type timeoutWire struct {
	Type         string `json:"type"`
	DeviceID     string `json:"device_id"`
	LastSeenMs   int64  `json:"last_seen_ms"`
	DeadlineMs   int64  `json:"deadline_ms"`
	DetectedAtMs int64  `json:"detected_at_ms"`
	TimeoutMs    int64  `json:"timeout_ms"`
	Class        string `json:"class,omitempty"`
	Shard        int    `json:"shard"`
	EventID      string `json:"event_id"`
}

type recoveredWire struct {
	Type        string `json:"type"`
	DeviceID    string `json:"device_id"`
	DownSinceMs int64  `json:"down_since_ms"`
	SeenAtMs    int64  `json:"seen_at_ms"`
	DownForMs   int64  `json:"down_for_ms"`
	EventID     string `json:"event_id"`
}

func TestEventSpecExamples(t *testing.T) {
	t.Parallel()
	// The README's "Messages", verbatim.
	const timeout = `{"type":"timeout","device_id":"d-42","last_seen_ms":1763683200123,"deadline_ms":1763683260123,` +
		`"detected_at_ms":1763683260180,"timeout_ms":60000,"class":"sensor","shard":7,"event_id":"d-42/1763683260123"}`
	const recovered = `{"type":"recovered","device_id":"d-42","down_since_ms":1763683260123,"seen_at_ms":1763683300000,` +
		`"down_for_ms":39877,"event_id":"d-42/1763683300000/r"}`

	got := appendTimeout(nil, "d-42", 1763683200123, 1763683260123, 1763683260180, 60000, "sensor", 7, extras{})
	if string(got) != timeout {
		t.Errorf("timeout:\n got %s\nwant %s", got, timeout)
	}
	got = appendRecovered(nil, "d-42", 1763683260123, 1763683300000)
	if string(got) != recovered {
		t.Errorf("recovered:\n got %s\nwant %s", got, recovered)
	}
	got = appendTimeout(nil, "d-1", 1, 2, 3, 1, "", 0, extras{})
	if want := `{"type":"timeout","device_id":"d-1","last_seen_ms":1,"deadline_ms":2,"detected_at_ms":3,"timeout_ms":1,"shard":0,"event_id":"d-1/2"}`; string(got) != want {
		t.Errorf("no class:\n got %s\nwant %s", got, want)
	}
}

var awkwardIDs = []string{
	"d-42",
	`quote"inside`,
	`back\slash`,
	"ctrl\x00\x01\x1f\x7f",
	"tab\tnew\nline\rcr\bbs\fff",
	"ünïcödé-設備-🛰️",
	"html<&>",
	"seps\u2028\u2029",
	"bad-utf8-\xff\xfe-\xc3",
	"/slashes/and/1763683260123",
	strings.Repeat("x", 256),
	"",
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, id := range awkwardIDs {
		for _, class := range []string{"", "sensor", `cl"ass\` + "\n"} {
			want, err := json.Marshal(timeoutWire{
				Type: TypeTimeout, DeviceID: id, LastSeenMs: 1763683200123, DeadlineMs: 1763683260123,
				DetectedAtMs: 1763683260180, TimeoutMs: 60000, Class: class, Shard: 4095,
				EventID: TimeoutEventID(id, 1763683260123),
			})
			if err != nil {
				t.Fatal(err)
			}
			got := appendTimeout(nil, id, 1763683200123, 1763683260123, 1763683260180, 60000, class, 4095, extras{})
			if !bytes.Equal(got, want) {
				t.Errorf("timeout %q class %q:\n got %s\nwant %s", id, class, got, want)
			}
		}
		want, err := json.Marshal(recoveredWire{
			Type: TypeRecovered, DeviceID: id, DownSinceMs: 1763683260123, SeenAtMs: 1763683300000,
			DownForMs: 39877, EventID: recoveredEventID(id, 1763683300000),
		})
		if err != nil {
			t.Fatal(err)
		}
		got := appendRecovered(nil, id, 1763683260123, 1763683300000)
		if !bytes.Equal(got, want) {
			t.Errorf("recovered %q:\n got %s\nwant %s", id, got, want)
		}
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range awkwardIDs {
		if !utf8.ValidString(id) {
			continue // invalid UTF-8 cannot survive any JSON round trip
		}
		events := []Event{
			{Type: TypeTimeout, DeviceID: id, LastSeenMs: 1763683200123, DeadlineMs: 1763683260123,
				DetectedAtMs: 1763683260180, TimeoutMs: 60000, Class: "sensor", Shard: 7},
			{Type: TypeTimeout, DeviceID: id, LastSeenMs: 1763683200123, DeadlineMs: 1763683260123,
				DetectedAtMs: 1763683260180, TimeoutMs: 60000, Shard: 0},
			{Type: TypeRecovered, DeviceID: id, DownSinceMs: 1763683260123, SeenAtMs: 1763683300000},
		}
		for _, e := range events {
			data, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(data) {
				t.Fatalf("invalid JSON %s", data)
			}
			var got Event
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("unmarshal %s: %v", data, err)
			}
			want := e
			if e.Type == TypeRecovered {
				want.DownForMs = e.SeenAtMs - e.DownSinceMs
				want.EventID = recoveredEventID(id, e.SeenAtMs)
			} else {
				want.EventID = TimeoutEventID(id, e.DeadlineMs)
			}
			if got != want {
				t.Errorf("round trip of %s:\n got %+v\nwant %+v", data, got, want)
			}
			// Field presence: class only when set, shard only on timeouts.
			var fields map[string]any
			if err := json.Unmarshal(data, &fields); err != nil {
				t.Fatal(err)
			}
			_, hasClass := fields["class"]
			_, hasShard := fields["shard"]
			if hasClass != (e.Class != "") || hasShard != (e.Type == TypeTimeout) {
				t.Errorf("%s: class present %v, shard present %v", data, hasClass, hasShard)
			}
		}
	}
}

func FuzzAppendEscaped(f *testing.F) {
	for _, id := range awkwardIDs {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := append(appendEscaped([]byte{'"'}, s), '"')
		if !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

func TestFillTimeouts(t *testing.T) {
	t.Parallel()
	p := newOfflinePublisher(t, 2*time.Second)
	const deadline = int64(1763683260123)
	detected := time.UnixMilli(deadline + 57)
	due := []shard.Member{
		{ID: "plain", Score: shard.Score(deadline, 0)},
		{ID: "sensor", Score: shard.Score(deadline, shard.NewMeta(1, 0))},
		{ID: "retired", Score: shard.Score(deadline, shard.NewMeta(3, 0))},
		{ID: "unknown", Score: shard.Score(deadline, shard.NewMeta(9, 0))},
		{ID: "override", Score: shard.Score(deadline, shard.NewMeta(1, shard.FlagOverride))},
		{ID: "override-missing", Score: shard.Score(deadline, shard.NewMeta(1, shard.FlagOverride))},
		{ID: "unflagged-override", Score: shard.Score(deadline, 0)},
		{ID: "padded", Score: shard.Score(deadline+2000, shard.NewMeta(2, shard.FlagPadded))},
	}
	overrides := map[string]int64{"override": 4321, "unflagged-override": 1111}
	b := &batch{}
	p.fillTimeouts(b, 5, due, overrides, detected, "", nil)

	want := []struct {
		timeout int64
		class   string
	}{
		{60000, ""}, {30000, "sensor"}, {60000, "retired"}, {60000, ""},
		{4321, "sensor"}, {30000, "sensor"}, {60000, ""}, {300000, "gateway"},
	}
	if len(b.msgs) != len(due) {
		t.Fatalf("%d messages, want %d", len(b.msgs), len(due))
	}
	for i, m := range b.msgs {
		var e Event
		if err := json.Unmarshal(m.Value, &e); err != nil {
			t.Fatalf("%s: %v", m.Value, err)
		}
		w := Event{
			Type: TypeTimeout, DeviceID: due[i].ID, LastSeenMs: deadline - want[i].timeout, DeadlineMs: deadline,
			DetectedAtMs: detected.UnixMilli(), TimeoutMs: want[i].timeout, Class: want[i].class, Shard: 5,
			EventID: TimeoutEventID(due[i].ID, deadline),
		}
		if e != w {
			t.Errorf("member %s:\n got %+v\nwant %+v", due[i].ID, e, w)
		}
		if string(m.Key) != due[i].ID || !m.Time.Equal(detected) {
			t.Errorf("member %s: key %q time %v", due[i].ID, m.Key, m.Time)
		}
		if b.deadlines[i] != deadline {
			t.Errorf("member %s: lateness deadline %d", due[i].ID, b.deadlines[i])
		}
	}
}

// newOfflinePublisher builds a Publisher whose broker is never contacted,
// with classes sensor=1 (30s), gateway=2 (5m) and retired=3 (registered,
// no longer configured).
func newOfflinePublisher(t testing.TB, pad time.Duration) *Publisher {
	t.Helper()
	p, err := New(DefaultConfig(), testKafkaConfig([]string{"127.0.0.1:1"}), Options{Policy: testPolicy(), PadWindow: pad})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func testPolicy() *timeouts.Policy {
	cfg := timeouts.DefaultConfig()
	cfg.Classes = map[string]time.Duration{"sensor": 30 * time.Second, "gateway": 5 * time.Minute}
	return timeouts.NewPolicy(cfg, map[string]int{"sensor": 1, "gateway": 2, "retired": 3})
}

func TestEventTypesExported(t *testing.T) {
	t.Parallel()
	// Event is the decoding type of consumers (tail, dev): every wire field
	// must have a home in it.
	fields := map[string]bool{}
	rt := reflect.TypeFor[Event]()
	for i := range rt.NumField() {
		fields[strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	for _, w := range []any{timeoutWire{}, recoveredWire{}} {
		wt := reflect.TypeOf(w)
		for i := range wt.NumField() {
			name := strings.Split(wt.Field(i).Tag.Get("json"), ",")[0]
			if !fields[name] {
				t.Errorf("Event has no field for %q", name)
			}
		}
	}
}

func BenchmarkAppendTimeout(b *testing.B) { benchAppendTimeout(b, "device-000123456") }

func BenchmarkAppendTimeoutEscaped(b *testing.B) { benchAppendTimeout(b, "dévice\t\"000123456\"") }

// benchAppendTimeout encodes one timeout event for device id into a reused
// buffer.
func benchAppendTimeout(b *testing.B, id string) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendTimeout(buf[:0], id, 1763683200123, 1763683260123, 1763683260180, 60000, "sensor", 7, extras{})
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkJSONMarshalTimeout(b *testing.B) {
	w := timeoutWire{Type: TypeTimeout, DeviceID: "device-000123456", LastSeenMs: 1763683200123, DeadlineMs: 1763683260123,
		DetectedAtMs: 1763683260180, TimeoutMs: 60000, Class: "sensor", Shard: 7, EventID: "device-000123456/1763683260123"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(w); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFillTimeouts is the whole per-call encoding of a scanner batch
// (20 members) into a pooled batch: keys, values and kafka.Messages; and of
// a draining shard's group (2,000 members) into a fresh batch, as after a
// collection emptied the pool.
func BenchmarkFillTimeouts(b *testing.B) {
	for _, c := range []struct {
		name   string
		n      int
		pooled bool
	}{{"20-pooled", 20, true}, {"2000-fresh", 2000, false}} {
		b.Run(c.name, func(b *testing.B) {
			p := newOfflinePublisher(b, time.Second)
			due := make([]shard.Member, c.n)
			for i := range due {
				due[i] = shard.Member{ID: fmt.Sprintf("device-%09d", i), Score: shard.Score(1763683260123, shard.NewMeta(i%3, 0))}
			}
			now := time.UnixMilli(1763683260180)
			b.ReportAllocs()
			for b.Loop() {
				bt := p.getBatch()
				if !c.pooled {
					bt = &batch{}
				}
				p.fillTimeouts(bt, 7, due, nil, now, "", nil)
				p.putBatch(bt)
			}
		})
	}
}

// The events of a family (SPEC §14): an unreachable child in the shape the
// SPEC lists, with its timeout's event id; a gateway's timeout with
// children_held, 0 included; each as encoding/json reads it back.
func TestKinnedEvents(t *testing.T) {
	t.Parallel()
	const unreachable = `{"type":"unreachable","device_id":"c-1","parent":"gw-1","last_seen_ms":1000,"deadline_ms":31000,` +
		`"detected_at_ms":31500,"timeout_ms":30000,"class":"sensor","shard":3,"event_id":"c-1/31000"}`
	got := appendTimeout(nil, "c-1", 1000, 31000, 31500, 30000, "sensor", 3, extras{typ: TypeUnreachable, parent: "gw-1"})
	if string(got) != unreachable {
		t.Errorf("unreachable:\n got %s\nwant %s", got, unreachable)
	}
	const gateway = `{"type":"timeout","device_id":"gw-1","last_seen_ms":1000,"deadline_ms":61000,` +
		`"detected_at_ms":61200,"timeout_ms":60000,"shard":0,"children_held":0,"storm_id":"s-1","event_id":"gw-1/61000"}`
	got = appendTimeout(nil, "gw-1", 1000, 61000, 61200, 60000, "", 0, extras{gateway: true, stormID: "s-1"})
	if string(got) != gateway {
		t.Errorf("gateway:\n got %s\nwant %s", got, gateway)
	}
	var e Event
	if err := json.Unmarshal(got, &e); err != nil || e.ChildrenHeld == nil || *e.ChildrenHeld != 0 {
		t.Fatalf("read back %+v, %v: children_held 0 lost", e, err)
	}
	if again, _ := json.Marshal(e); string(again) != gateway {
		t.Errorf("round trip:\n got %s\nwant %s", again, gateway)
	}
}
