package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
)

// sent is one message of the bad-input corpus and what flatline must make
// of it.
type sent struct {
	kind   string
	key    []byte
	value  []byte
	at     time.Time
	reason decode.Reason // "" for a valid message
	// For a valid message with its own device: the deadline it must leave
	// (0 for a tombstone: the device must be gone).
	deadline int64
}

// corpus builds the invalid and odd-but-valid messages: every kind n times,
// each unique (a nonce in its key or value) so that its dead-letter copy
// can be traced back. at is the Kafka timestamp of them all.
func corpus(n int, at time.Time, def time.Duration, classes map[string]time.Duration) []sent {
	ms := at.UnixMilli()
	defDeadline := ms + def.Milliseconds()
	var out []sent
	bad := func(kind string, reason decode.Reason, mk func(i int) (key, value []byte)) {
		for i := 0; i < n; i++ {
			k, v := mk(i)
			out = append(out, sent{kind: kind, key: k, value: v, at: at, reason: reason})
		}
	}
	key := func(kind string, i int) []byte { return []byte(fmt.Sprintf("bad-%s-%d", kind, i)) }
	val := func(s string) func(kind string) func(i int) ([]byte, []byte) {
		return func(kind string) func(i int) ([]byte, []byte) {
			return func(i int) ([]byte, []byte) { return key(kind, i), []byte(s) }
		}
	}
	nested := func(depth int) string {
		return `{"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	}
	for _, c := range []struct {
		kind   string
		reason decode.Reason
		mk     func(kind string) func(i int) ([]byte, []byte)
	}{
		{"not-json", decode.ReasonNotObject, val(`{"ts":`)},
		{"text", decode.ReasonNotObject, val(`hello`)},
		{"array", decode.ReasonNotObject, val(`[1,2]`)},
		{"null", decode.ReasonNotObject, val(`null`)},
		{"string", decode.ReasonNotObject, val(`"dev-1"`)},
		{"number", decode.ReasonNotObject, val(`42`)},
		{"unclosed-string", decode.ReasonNotObject, val(`{"class":"sensor}`)},
		{"nested-65", decode.ReasonNotObject, val(nested(64))},
		{"nested-30000", decode.ReasonNotObject, val(nested(30000))},
		{"trailing", decode.ReasonTrailingData, val(`{"ts":1} x`)},
		{"two-objects", decode.ReasonTrailingData, val(`{}{}`)},
		{"ts-bool", decode.ReasonBadType, val(`{"ts":true}`)},
		{"ts-object", decode.ReasonBadType, val(`{"ts":{"ms":1}}`)},
		{"id-number", decode.ReasonBadType, val(`{"device_id":5}`)},
		{"class-number", decode.ReasonBadType, val(`{"class":7}`)},
		{"timeout-string", decode.ReasonBadType, val(`{"timeout_ms":"30000"}`)},
		{"ts-word", decode.ReasonBadTS, val(`{"ts":"yesterday"}`)},
		{"ts-bad-date", decode.ReasonBadTS, val(`{"ts":"2026-13-45T99:00:00Z"}`)},
		{"ts-overflow", decode.ReasonBadTS, val(`{"ts":1e400}`)},
		{"ts-int-overflow", decode.ReasonBadTS, val(`{"ts":99999999999999999999}`)},
		{"id-mismatch", decode.ReasonIDMismatch, val(`{"device_id":"someone-else"}`)},
		{"id-not-utf8", decode.ReasonIDMismatch, val("{\"device_id\":\"\xff\xfe\"}")},
	} {
		bad(c.kind, c.reason, c.mk(c.kind))
	}
	bad("no-key", decode.ReasonNoKey, func(i int) ([]byte, []byte) { return nil, []byte(fmt.Sprintf(`{"nonce":"no-key-%d"}`, i)) })
	bad("empty-key", decode.ReasonNoKey, func(i int) ([]byte, []byte) {
		return []byte{}, []byte(fmt.Sprintf(`{"nonce":"empty-key-%d"}`, i))
	})
	bad("key-300", decode.ReasonKeyTooLong, func(i int) ([]byte, []byte) {
		k := fmt.Sprintf("bad-key-300-%d-", i)
		return []byte(k + strings.Repeat("k", 300-len(k))), []byte(`{}`)
	})
	bad("key-not-utf8", decode.ReasonKeyNotUTF8, func(i int) ([]byte, []byte) {
		return []byte(fmt.Sprintf("bad-utf8-%d-\xff\xfe", i)), []byte(`{}`)
	})
	bad("value-64KiB+1", decode.ReasonTooLarge, func(i int) ([]byte, []byte) {
		return key("value-64KiB+1", i), padded(`{"pad":"`, `"}`, 64<<10+1)
	})
	// Three 1 MiB values in all: enough to show one cannot stall a
	// partition, few enough to keep the broker small.
	for i := 0; i < 3; i++ {
		out = append(out, sent{kind: "value-1MiB", key: key("value-1MiB", i), value: padded(`{"pad":"`, `"}`, 1<<20), at: at, reason: decode.ReasonTooLarge})
	}

	// Odd but valid: each on a device of its own, with the deadline it must
	// leave.
	good := func(kind string, deadline int64, mk func(id string) []byte) {
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("odd-%s-%d", kind, i)
			out = append(out, sent{kind: kind, key: []byte(id), value: mk(id), at: at, deadline: deadline})
		}
	}
	lit := func(s string) func(string) []byte { return func(string) []byte { return []byte(s) } }
	good("ts-far-future", defDeadline, lit(`{"ts":4102444800000}`))
	good("ts-far-past", defDeadline, lit(`{"ts":0}`))
	good("ts-negative", defDeadline, lit(`{"ts":-9223372036854775808}`))
	good("ts-rfc3339-past", defDeadline, lit(`{"ts":"1999-01-01T00:00:00Z"}`))
	good("ts-within-skew", ms+300+def.Milliseconds(), lit(`{"ts":`+strconv.FormatInt(ms+300, 10)+`}`))
	good("ts-fraction", defDeadline, lit(`{"ts":`+strconv.FormatInt(ms, 10)+`.75}`))
	good("ts-rfc3339", defDeadline, lit(`{"ts":"`+at.UTC().Format(time.RFC3339Nano)+`"}`))
	good("timeout-negative", defDeadline, lit(`{"timeout_ms":-5}`))
	good("timeout-huge", defDeadline, lit(`{"timeout_ms":1e30}`))
	good("timeout-maxint", defDeadline, lit(`{"timeout_ms":9223372036854775807}`))
	good("timeout-below-min", defDeadline, lit(`{"timeout_ms":500}`))
	good("timeout-fraction", defDeadline, lit(`{"timeout_ms":1500.5}`))
	good("timeout-valid", ms+120000, lit(`{"timeout_ms":120000}`))
	good("class-unknown", defDeadline, lit(`{"class":"no-such-class"}`))
	good("class-known", ms+classes["sensor"].Milliseconds(), lit(`{"class":"sensor"}`))
	good("extra-fields", defDeadline, func(id string) []byte {
		return []byte(`{"fw":{"v":[1,2,{"x":null}],"s":"\u00e9\ud83d\ude00"},"device_id":"` + id + `","rssi":-71.5,"ok":true}`)
	})
	good("nulls", defDeadline, lit(`{"device_id":null,"ts":null,"class":null,"timeout_ms":null}`))
	good("empty-object", defDeadline, lit(`{}`))
	good("whitespace", defDeadline, lit(" \t\r\n{ \"ts\" : "+strconv.FormatInt(ms, 10)+" } \n"))
	good("escaped-id", defDeadline, func(id string) []byte {
		return []byte(`{"device_id":"\u006f` + id[1:] + `"}`) // "\u006f" is "o", id's first letter
	})
	good("value-64KiB", defDeadline, func(string) []byte { return padded(`{"pad":"`, `"}`, 64<<10) })
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("odd-key-256-%d-", i)
		k += strings.Repeat("ü", (256-len(k))/2)
		k += strings.Repeat("k", 256-len(k))
		out = append(out, sent{kind: "key-256", key: []byte(k), value: []byte(`{}`), at: at, deadline: defDeadline})
	}
	return out
}

// padded returns head + x… + tail of exactly size bytes.
func padded(head, tail string, size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, head...)
	for len(b) < size-len(tail) {
		b = append(b, 'x')
	}
	return append(b, tail...)
}

func headers(m kafka.Message) map[string]string {
	h := make(map[string]string, len(m.Headers))
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

// TestBadInput mixes a corpus of invalid heartbeats (every reason code)
// and odd-but-valid ones (which must fall back, not be rejected) into valid
// traffic: 10,000 messages over 4 partitions. Flatline must not crash;
// exactly the invalid ones reach the dead-letter topic, once, with their
// reason and source headers; every reason is counted in
// flatline_heartbeats_invalid_total; every valid device, odd or not, has
// exactly the deadline it should; tombstoned devices are gone; every
// partition is consumed to its end. A second instance with
// timeouts.strict_classes shows the one reason that needs it,
// unknown_class.
func TestBadInput(t *testing.T) {
	t.Parallel()
	const (
		partitions = 4
		total      = 10000
		perKind    = 40
		regular    = 500 // regular devices, beating several times each
		tombstoned = 100
		strictSig  = "device-signals-strict"
		strictDLQ  = "device-signals-strict-dlq"
	)
	rng := seed(t)
	rs := testenv.Redis(t)
	// Record batches up to 32 MiB, so a 1 MiB heartbeat can be produced.
	brokers := testenv.KafkaWith(t, []kfake.Opt{kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(32 << 20)})},
		partitions, append(e2etest.Topics, strictSig, strictDLQ)...).Brokers()
	classes := map[string]time.Duration{"sensor": 30 * time.Minute}

	newCfg := func() configs.Config {
		cfg := e2etest.Config(t, []string{rs.Addr()}, brokers)
		cfg.Kafka.SessionTimeout = 2 * time.Second
		cfg.Timeouts.Default = time.Hour // nothing fires during the test
		cfg.Timeouts.Classes = classes
		cfg.Shards.InitialCount = 8
		return cfg
	}
	cfg := newCfg()
	cfg.HTTP.Addr = "127.0.0.1:0"
	inst := e2etest.Start(t, cfg, app.Hooks{})
	strictCfg := newCfg()
	strictCfg.Kafka.SignalsTopic, strictCfg.Kafka.DeadLetterTopic = strictSig, strictDLQ
	strictCfg.Timeouts.StrictClasses = true
	strict := e2etest.Start(t, strictCfg, app.Hooks{})

	at := time.Now().Truncate(time.Millisecond)
	ms := at.UnixMilli()
	def := cfg.Timeouts.Default

	// Phase 1: the devices to be tombstoned are tracked first.
	var first []kafka.Message
	for i := 0; i < tombstoned; i++ {
		id := fmt.Sprintf("tomb-%03d", i)
		first = append(first, kafka.Message{Key: []byte(id), Value: []byte(`{"ts":` + strconv.FormatInt(ms, 10) + `}`), Time: at})
	}
	e2etest.Produce(t, brokers, e2etest.Signals, first...)

	// Phase 2: the corpus, tombstones and regular heartbeats, shuffled.
	msgs := corpus(perKind, at, def, classes)
	for i := 0; i < tombstoned; i++ {
		var v []byte // nil: a Kafka null; every other one an empty value
		if i%2 == 1 {
			v = []byte{}
		}
		msgs = append(msgs, sent{kind: "tombstone", key: []byte(fmt.Sprintf("tomb-%03d", i)), value: v, at: at})
	}
	newest := make(map[string]int64) // regular device → newest ts
	for len(msgs) < total {
		id := fmt.Sprintf("reg-%04d", rng.IntN(regular))
		ts := ms - rng.Int64N(5000)
		newest[id] = max(newest[id], ts)
		msgs = append(msgs, sent{kind: "regular", key: []byte(id), value: []byte(`{"device_id":"` + id + `","ts":` + strconv.FormatInt(ts, 10) + `}`), at: time.UnixMilli(ts)})
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	kmsgs := make([]kafka.Message, len(msgs))
	wantReasons := map[decode.Reason]int{}
	kinds := map[string]bool{}
	invalid := 0
	for i, s := range msgs {
		kmsgs[i] = kafka.Message{Key: s.key, Value: s.value, Time: s.at}
		if s.reason != "" {
			wantReasons[s.reason]++
			kinds[s.kind] = true
			invalid++
		}
	}
	produced := time.Now()
	e2etest.Produce(t, brokers, e2etest.Signals, kmsgs...)

	// The strict instance: unknown classes are invalid there.
	var strictMsgs []kafka.Message
	for i := 0; i < perKind; i++ {
		strictMsgs = append(strictMsgs,
			kafka.Message{Key: []byte(fmt.Sprintf("strict-unknown-%d", i)), Value: []byte(`{"class":"no-such-class"}`), Time: at},
			kafka.Message{Key: []byte(fmt.Sprintf("strict-known-%d", i)), Value: []byte(`{"class":"sensor"}`), Time: at})
	}
	e2etest.Produce(t, brokers, strictSig, strictMsgs...)

	// No partition stuck: both groups commit every partition to its end.
	e2etest.Eventually(t, 60*time.Second, "every signals partition consumed to its end", func() bool {
		if inst.Exited() || strict.Exited() {
			t.Fatalf("flatline exited on bad input: %v / %v", inst.Err(), strict.Err())
		}
		return testenv.CaughtUp(t, brokers, cfg.Kafka.GroupID, e2etest.Signals, partitions) &&
			testenv.CaughtUp(t, brokers, strictCfg.Kafka.GroupID, strictSig, partitions)
	})
	consumed := time.Since(produced)

	// The dead-letter topic holds exactly the invalid messages, once each,
	// with their reason and the offset they came from.
	origin := map[string]kafka.Message{} // "partition/offset" → the signals message
	for _, m := range testenv.ReadTopic(t, brokers, e2etest.Signals, partitions) {
		origin[fmt.Sprintf("%d/%d", m.Partition, m.Offset)] = m
	}
	type ident struct{ key, value string }
	want := map[ident][]sent{}
	for _, s := range msgs {
		if s.reason != "" {
			v := s.value
			if len(v) > cfg.Ingest.MaxValueBytes {
				v = v[:cfg.Ingest.MaxValueBytes]
			}
			id := ident{string(s.key), string(v)}
			want[id] = append(want[id], s)
		}
	}
	dead := testenv.ReadTopic(t, brokers, e2etest.DLQ, partitions)
	if len(dead) != invalid {
		t.Errorf("dead-letter topic holds %d messages, want the %d invalid ones", len(dead), invalid)
	}
	gotReasons := map[decode.Reason]int{}
	for _, d := range dead {
		h := headers(d)
		id := ident{string(d.Key), string(d.Value)}
		cands := want[id]
		if len(cands) == 0 {
			t.Errorf("dead-lettered message not in the invalid corpus (or twice): key %.40q value %.60q headers %v", d.Key, d.Value, h)
			continue
		}
		s := cands[0]
		want[id] = cands[1:]
		gotReasons[decode.Reason(h["flatline-reason"])]++
		if h["flatline-reason"] != string(s.reason) {
			t.Errorf("%s: flatline-reason %q, want %q", s.kind, h["flatline-reason"], s.reason)
		}
		src, ok := strings.CutPrefix(h["flatline-source"], e2etest.Signals+"/")
		o, found := origin[src]
		if !ok || !found || string(o.Key) != string(s.key) || string(o.Value) != string(s.value) {
			t.Errorf("%s: flatline-source %q does not point at the original message", s.kind, h["flatline-source"])
		}
	}
	for id, left := range want {
		if len(left) > 0 {
			t.Errorf("invalid %s message (key %.40q) is not in the dead-letter topic", left[0].kind, id.key)
		}
	}

	// A metric per reason, equal to what was sent.
	m := inst.Metrics
	for _, r := range decode.AllReasons {
		switch r {
		case decode.ReasonUnknownClass:
			continue // only with strict_classes: checked below
		case decode.ReasonNoDeviceID, decode.ReasonBadPayload, decode.ReasonUnknownSchema:
			// Only where ingest.from reads another shape: TestShapes and
			// TestAvroShape (internal/e2e/pipeline) dead-letter them.
			if got := testutil.ToFloat64(m.Invalid.WithLabelValues(string(r))); got != 0 {
				t.Errorf("flatline_heartbeats_invalid_total{reason=%q} = %v on the native shape", r, got)
			}
			continue
		}
		if wantReasons[r] == 0 {
			t.Errorf("the corpus has no %s message", r)
		}
		if got := testutil.ToFloat64(m.Invalid.WithLabelValues(string(r))); got != float64(wantReasons[r]) {
			t.Errorf("flatline_heartbeats_invalid_total{reason=%q} = %v, want %d", r, got, wantReasons[r])
		}
	}
	metricsBody, err := e2etest.HTTPGet("http://" + inst.HTTP.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText := string(metricsBody)
	for r := range wantReasons {
		if !strings.Contains(metricsText, `flatline_heartbeats_invalid_total{reason="`+string(r)+`"} `+strconv.Itoa(wantReasons[r])) {
			t.Errorf("/metrics lacks flatline_heartbeats_invalid_total{reason=%q} %d", r, wantReasons[r])
		}
	}
	count := func(kinds ...string) (n int) {
		for _, s := range msgs {
			if slices.Contains(kinds, s.kind) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		kind string
		want int
	}{
		{"skew_corrected", count("ts-far-future", "ts-far-past", "ts-negative", "ts-rfc3339-past")},
		{"timeout_out_of_range", count("timeout-negative", "timeout-huge", "timeout-maxint", "timeout-below-min", "timeout-fraction")},
		{"unknown_class", count("class-unknown")},
	} {
		if got := testutil.ToFloat64(m.Fallbacks.WithLabelValues(c.kind)); got != float64(c.want) {
			t.Errorf("flatline_heartbeats_fallback_total{kind=%q} = %v, want %d", c.kind, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.Tombstones); got != tombstoned {
		t.Errorf("tombstones counted %v, want %d", got, tombstoned)
	}

	// Every valid device has exactly its deadline; tombstoned ones and the
	// keys of invalid messages are not tracked.
	ctx := context.Background()
	deadline := func(st *e2etest.Instance, id string) (int64, bool) {
		score, ok, err := st.Store.Score(ctx, shard.Of(shard.Hash(id), 8), id)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := shard.DecodeScore(score)
		return d, ok
	}
	checked := 0
	for _, s := range msgs {
		id := string(s.key)
		switch {
		case s.kind == "regular":
			continue
		case s.kind == "tombstone":
			if _, ok := deadline(inst, id); ok {
				t.Errorf("%s: still tracked after its tombstone", id)
			}
		case s.reason != "":
			if len(s.key) > 0 && s.reason != decode.ReasonKeyNotUTF8 && s.reason != decode.ReasonKeyTooLong {
				if _, ok := deadline(inst, id); ok {
					t.Errorf("%s: tracked although its message was invalid (%s)", id, s.reason)
				}
			}
		default:
			got, ok := deadline(inst, id)
			if !ok || got != s.deadline {
				t.Errorf("%s (%s): deadline %d (tracked %v), want %d", id, s.kind, got, ok, s.deadline)
			}
		}
		checked++
	}
	for id, ts := range newest {
		if got, ok := deadline(inst, id); !ok || got != ts+def.Milliseconds() {
			t.Errorf("regular device %s: deadline %d (tracked %v), want its newest heartbeat %d + %v", id, got, ok, ts, def)
		}
		checked++
	}

	// The strict instance dead-letters exactly the unknown classes.
	strictDead := testenv.ReadTopic(t, brokers, strictDLQ, partitions)
	if len(strictDead) != perKind {
		t.Errorf("strict dead-letter topic holds %d messages, want %d", len(strictDead), perKind)
	}
	for _, d := range strictDead {
		if r := headers(d)["flatline-reason"]; r != string(decode.ReasonUnknownClass) || !strings.HasPrefix(string(d.Key), "strict-unknown-") {
			t.Errorf("strict dead letter %q with reason %q", d.Key, r)
		}
	}
	if got := testutil.ToFloat64(strict.Metrics.Invalid.WithLabelValues(string(decode.ReasonUnknownClass))); got != perKind {
		t.Errorf("strict flatline_heartbeats_invalid_total{reason=\"unknown_class\"} = %v, want %d", got, perKind)
	}
	for i := 0; i < perKind; i++ {
		if got, ok := deadline(strict, fmt.Sprintf("strict-known-%d", i)); !ok || got != ms+classes["sensor"].Milliseconds() {
			t.Errorf("strict-known-%d: deadline %d (tracked %v), want the sensor class's", i, got, ok)
		}
	}

	for _, st := range []*e2etest.Instance{inst, strict} {
		if err := st.Stop(); err != nil {
			t.Errorf("flatline stopped with %v", err)
		}
	}
	t.Logf("%d messages (%d invalid of %d kinds, %d odd-but-valid, %d tombstones, the rest regular beats of %d devices) consumed in %v; "+
		"dead-lettered %d, by reason %v; %d devices checked; strict instance: %d unknown_class",
		len(msgs), invalid, len(kinds), count(oddKinds(msgs)...), tombstoned, len(newest), consumed.Round(time.Millisecond),
		len(dead), gotReasons, checked, len(strictDead))
}

func oddKinds(msgs []sent) []string {
	var out []string
	for _, s := range msgs {
		if s.reason == "" && s.kind != "regular" && s.kind != "tombstone" && !slices.Contains(out, s.kind) {
			out = append(out, s.kind)
		}
	}
	return out
}
