package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

const (
	testTopic = "device-timeouts"
	testParts = 4
	padWindow = 2 * time.Second
)

func newTestPublisher(t *testing.T, brokers []string, cfg Config, m *metrics.Metrics) *Publisher {
	t.Helper()
	return publisherOn(t, testKafkaConfig(brokers), cfg, m)
}

// publisherOn is newTestPublisher with a kafka section of the test's own.
func publisherOn(t *testing.T, k kafkaconn.Config, cfg Config, m *metrics.Metrics) *Publisher {
	t.Helper()
	p, err := New(cfg, k, Options{
		Policy: testPolicy(), PadWindow: padWindow, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return p
}

// kafkaPublisher starts a Kafka with testParts partitions of testTopic and
// a publisher over it in the default configuration, counting on m (nil: no
// metrics).
func kafkaPublisher(t *testing.T, m *metrics.Metrics) (*testenv.KafkaCluster, *Publisher) {
	t.Helper()
	k := testenv.Kafka(t, testParts, testTopic)
	return k, newTestPublisher(t, k.Brokers(), DefaultConfig(), m)
}

// dueCase is a due member and the event it must become.
type dueCase struct {
	member shard.Member
	want   Event
}

// everyCombination builds a member for every combination of class (none,
// configured, registered but unconfigured, unknown id), override (none,
// present, flagged but missing) and padding, plus awkward ids.
func everyCombination(deadline int64, detected time.Time, shardID int) ([]dueCase, map[string]int64) {
	classes := []struct {
		id      int
		name    string
		timeout int64
	}{{0, "", 60000}, {1, "sensor", 30000}, {3, "retired", 60000}, {77, "", 60000}}
	overrides := map[string]int64{}
	var cases []dueCase
	n := 0
	for _, c := range classes {
		for _, ovr := range []string{"none", "set", "missing"} {
			for _, padded := range []bool{false, true} {
				id := fmt.Sprintf("dev-c%d-%s-pad%v", c.id, ovr, padded)
				if n%2 == 0 {
					// Quotes, controls, unicode, ... (ingest refuses keys
					// that are not UTF-8, so dispatch never sees one).
					id = validAwkwardIDs[(n/2)%len(validAwkwardIDs)] + id
				}
				n++
				var flags shard.Meta
				timeout := c.timeout
				switch ovr {
				case "set":
					flags |= shard.FlagOverride
					timeout = 12000 + int64(n)
					overrides[id] = timeout
				case "missing":
					flags |= shard.FlagOverride
				}
				stored := deadline + int64(n) // distinct deadlines
				real := stored
				if padded {
					flags |= shard.FlagPadded
					stored += padWindow.Milliseconds()
				}
				cases = append(cases, dueCase{
					member: shard.Member{ID: id, Score: shard.Score(stored, shard.NewMeta(c.id, flags))},
					want: Event{
						Type: TypeTimeout, DeviceID: id, LastSeenMs: real - timeout, DeadlineMs: real,
						DetectedAtMs: detected.UnixMilli(), TimeoutMs: timeout, Class: c.name, Shard: shardID,
						EventID: id + "/" + fmt.Sprint(real),
					},
				})
			}
		}
	}
	return cases, overrides
}

func members(cases []dueCase) []shard.Member {
	ms := make([]shard.Member, len(cases))
	for i, c := range cases {
		ms[i] = c.member
	}
	return ms
}

var validAwkwardIDs = func() (ids []string) {
	for _, id := range awkwardIDs {
		if utf8.ValidString(id) {
			ids = append(ids, id)
		}
	}
	return ids
}()

// checkRecords asserts that records hold exactly the wanted events, each
// once, keyed and partitioned as Java would, stamped with its detection time.
func checkRecords(t *testing.T, recs []kafka.Message, want map[string]Event) {
	t.Helper()
	if len(recs) != len(want) {
		t.Errorf("%d records, want %d", len(recs), len(want))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		var e Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Errorf("record %s: %v", r.Value, err)
			continue
		}
		w, ok := want[e.EventID]
		if !ok {
			t.Errorf("unexpected event %s", r.Value)
			continue
		}
		if seen[e.EventID] {
			t.Errorf("duplicate event %s", e.EventID)
		}
		seen[e.EventID] = true
		if e != w {
			t.Errorf("event %q:\n got %+v\nwant %+v", e.EventID, e, w)
		}
		if !bytes.Equal(r.Value, w.appendJSON(nil)) {
			t.Errorf("event %q bytes:\n got %s\nwant %s", e.EventID, r.Value, w.appendJSON(nil))
		}
		if string(r.Key) != e.DeviceID {
			t.Errorf("event %q: key %q, want the device id", e.EventID, r.Key)
		}
		if jp := javaPartition(r.Key, testParts); r.Partition != jp {
			t.Errorf("device %q on partition %d, Java's partitioner says %d", e.DeviceID, r.Partition, jp)
		}
		at := w.DetectedAtMs
		if w.Type == TypeRecovered {
			at = r.Time.UnixMilli() // publish time; checked by the caller
		}
		if r.Time.UnixMilli() != at {
			t.Errorf("event %q: record time %d, want %d", e.EventID, r.Time.UnixMilli(), at)
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("event %q lost", id)
		}
	}
}

func TestTimeoutsPublished(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{})
	k, p := kafkaPublisher(t, m)
	ctx := testenv.Context(t, 30*time.Second)

	deadline := time.Now().Add(-time.Second).UnixMilli()
	detected := time.UnixMilli(deadline + 1500)
	cases, overrides := everyCombination(deadline, detected, 7)
	if err := p.Timeouts(ctx, 7, members(cases), overrides, detected); err != nil {
		t.Fatalf("timeouts: %v", err)
	}
	want := map[string]Event{}
	for _, c := range cases {
		want[c.want.EventID] = c.want
	}
	checkRecords(t, testenv.ReadTopic(t, k.Brokers(), testTopic, testParts), want)

	if got := testutil.ToFloat64(m.TimeoutsPublished); got != float64(len(cases)) {
		t.Errorf("TimeoutsPublished = %v, want %d", got, len(cases))
	}
	if got := histogramCount(t, m.Lateness); got != uint64(len(cases)) {
		t.Errorf("lateness observations = %d, want %d", got, len(cases))
	}
	if got := m.PublishErrorsTotal(); got != 0 {
		t.Errorf("PublishErrors = %v", got)
	}

	// The same silences found again (a rescan after a crash before removal)
	// carry the same event ids: consumers drop them as duplicates.
	again := detected.Add(5 * time.Second)
	if err := p.Timeouts(ctx, 7, members(cases), overrides, again); err != nil {
		t.Fatalf("timeouts again: %v", err)
	}
	recs := testenv.ReadTopic(t, k.Brokers(), testTopic, testParts)
	byID := map[string][]Event{}
	for _, r := range recs {
		var e Event
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		byID[e.EventID] = append(byID[e.EventID], e)
	}
	for id := range want {
		es := byID[id]
		if len(es) != 2 || es[0].DetectedAtMs == es[1].DetectedAtMs {
			t.Errorf("event id %q: want one event per detection under the same id, got %+v", id, es)
		}
	}
}

func TestRecoveredPublished(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{})
	k, p := kafkaPublisher(t, m)
	ctx := testenv.Context(t, 30*time.Second)

	rs := []timeouts.Recovery{
		{DeviceID: "d-42", DownSinceMs: 1763683260123, SeenAtMs: 1763683300000},
		{DeviceID: `we"ird\` + "\n", DownSinceMs: 1000, SeenAtMs: 1001},
		{DeviceID: "設備-7", DownSinceMs: 1763683260123, SeenAtMs: 1763683260123 + 86400000},
	}
	before := time.Now().Truncate(time.Millisecond)
	if err := p.Recovered(ctx, rs); err != nil {
		t.Fatalf("recovered: %v", err)
	}
	after := time.Now()
	want := map[string]Event{}
	for _, r := range rs {
		e := Event{Type: TypeRecovered, DeviceID: r.DeviceID, DownSinceMs: r.DownSinceMs, SeenAtMs: r.SeenAtMs,
			DownForMs: r.SeenAtMs - r.DownSinceMs, EventID: r.DeviceID + "/" + fmt.Sprint(r.SeenAtMs) + "/r"}
		want[e.EventID] = e
	}
	recs := testenv.ReadTopic(t, k.Brokers(), testTopic, testParts)
	checkRecords(t, recs, want)
	for _, r := range recs {
		if r.Time.Before(before) || r.Time.After(after) {
			t.Errorf("record time %v outside the publish call [%v, %v]", r.Time, before, after)
		}
	}
	if got := testutil.ToFloat64(m.RecoveredPublished); got != 3 {
		t.Errorf("RecoveredPublished = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.TimeoutsPublished); got != 0 {
		t.Errorf("TimeoutsPublished = %v, want 0", got)
	}
}

// rejectProduce makes the cluster answer Produce requests for the partitions
// selected by fail with NOT_ENOUGH_REPLICAS (retriable, nothing appended)
// while failing is set. Each rejected request for partition 0 is signalled on
// rejected: kafka-go sends at most one request per partition per attempt, so
// n signals mean n failed attempts.
func rejectProduce(c *kfake.Cluster, failing *atomic.Bool, fail func(int32) bool, rejected chan<- struct{}) {
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if !failing.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		hit, zero := false, false
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				hit = hit || fail(rp.Partition)
				zero = zero || rp.Partition == 0
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !hit {
			return nil, nil, false // kafka-go sends one partition per request
		}
		if zero {
			select {
			case rejected <- struct{}{}:
			default:
			}
		}
		return resp, nil, true
	})
}

func TestTimeoutsRetryUntilKafkaRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(int32) bool
	}{
		{"all partitions", func(int32) bool { return true }},
		{"partition 0 only", func(p int32) bool { return p == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(metrics.Options{})
			k, p := kafkaPublisher(t, m)
			ctx := testenv.Context(t, 30*time.Second)

			var failing atomic.Bool
			failing.Store(true)
			rejected := make(chan struct{})
			rejectProduce(k.Cluster(), &failing, tc.fail, rejected)

			deadline := time.Now().UnixMilli()
			detected := time.UnixMilli(deadline + 10)
			cases, overrides := everyCombination(deadline, detected, 2)
			onZero := 0
			for _, c := range cases {
				if javaPartition([]byte(c.member.ID), testParts) == 0 {
					onZero++
				}
			}
			if onZero == 0 || onZero == len(cases) {
				t.Fatalf("%d of %d events on partition 0: the test needs some on it and some elsewhere", onZero, len(cases))
			}
			done := make(chan error, 1)
			go func() { done <- p.Timeouts(ctx, 2, members(cases), overrides, detected) }()

			for i := range 3 {
				select {
				case <-rejected:
				case err := <-done:
					t.Fatalf("Timeouts returned %v while Kafka rejects produce (after %d rejections)", err, i)
				case <-ctx.Done():
					t.Fatal("no produce request reached the broker")
				}
			}
			select {
			case err := <-done:
				t.Fatalf("Timeouts returned %v while Kafka rejects produce", err)
			default:
			}
			failing.Store(false)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Timeouts after recovery: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("Timeouts did not return after Kafka recovered")
			}

			want := map[string]Event{}
			for _, c := range cases {
				want[c.want.EventID] = c.want
			}
			checkRecords(t, testenv.ReadTopic(t, k.Brokers(), testTopic, testParts), want)
			if got := m.PublishErrorsTotal(); got < 3 {
				t.Errorf("PublishErrors = %v, want at least 3", got)
			}
			if got := testutil.ToFloat64(m.TimeoutsPublished); got != float64(len(cases)) {
				t.Errorf("TimeoutsPublished = %v, want %d (each event counted once)", got, len(cases))
			}
			if got := histogramCount(t, m.Lateness); got != uint64(len(cases)) {
				t.Errorf("lateness observations = %d, want %d", got, len(cases))
			}
		})
	}
}

func TestTimeoutsGiveUpOnCancel(t *testing.T) {
	t.Parallel()
	k, p := kafkaPublisher(t, nil)
	var failing atomic.Bool
	failing.Store(true)
	rejected := make(chan struct{})
	rejectProduce(k.Cluster(), &failing, func(int32) bool { return true }, rejected)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// "21" is on partition 0 of 4 (javaVectors), where rejections are signalled.
		done <- p.Timeouts(ctx, 0, []shard.Member{{ID: "21", Score: shard.Score(time.Now().UnixMilli(), 0)}}, nil, time.Now())
	}()
	select {
	case <-rejected:
	case <-time.After(30 * time.Second):
		t.Fatal("no produce request reached the broker")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Timeouts = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Timeouts did not return after cancel")
	}
	if err := p.Timeouts(ctx, 0, []shard.Member{{ID: "d-2"}}, nil, time.Now()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Timeouts on a cancelled context = %v", err)
	}
}

// Scanners call Timeouts concurrently; their events must share produce
// requests rather than cost one round trip each.
func TestConcurrentCallersShareProduceRequests(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, 1, testTopic)
	var produces atomic.Int64
	k.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		produces.Add(1)
		return nil, nil, false // observe only; stays installed
	})
	cfg := DefaultConfig()
	cfg.Linger = 300 * time.Millisecond
	p := newTestPublisher(t, k.Brokers(), cfg, nil)
	ctx := testenv.Context(t, 30*time.Second)

	const callers, each = 8, 5
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			due := make([]shard.Member, each)
			for i := range due {
				due[i] = shard.Member{ID: fmt.Sprintf("d-%d-%d", c, i), Score: shard.Score(time.Now().UnixMilli(), 0)}
			}
			<-start
			errs <- p.Timeouts(ctx, c, due, nil, time.Now())
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n := produces.Load()
	t.Logf("%d callers × %d events: %d produce requests", callers, each, n)
	if n >= callers {
		t.Errorf("%d produce requests for %d concurrent callers: events were not gathered", n, callers)
	}
	if got := len(testenv.ReadTopic(t, k.Brokers(), testTopic, 1)); got != callers*each {
		t.Errorf("%d records, want %d", got, callers*each)
	}
}

func TestClosedPublisher(t *testing.T) {
	t.Parallel()
	p := newOfflinePublisher(t, 0)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 10*time.Second)
	if err := p.Timeouts(ctx, 0, []shard.Member{{ID: "d-1"}}, nil, time.Now()); !errors.Is(err, errClosed) {
		t.Fatalf("Timeouts after Close = %v, want errClosed", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	good := testKafkaConfig([]string{"127.0.0.1:9092"})
	if _, err := New(DefaultConfig(), good, Options{}); err == nil {
		t.Error("New without a policy succeeded")
	}
	bad := DefaultConfig()
	bad.Linger = -1
	if _, err := New(bad, good, Options{Policy: testPolicy()}); err == nil {
		t.Error("New with a negative linger succeeded")
	}
	noTopic := good
	noTopic.TimeoutsTopic = ""
	if _, err := New(DefaultConfig(), noTopic, Options{Policy: testPolicy()}); err == nil {
		t.Error("New without a timeouts topic succeeded")
	}
}

// Events land on the partition Kafka's Java client would pick for their
// key (murmur2), so consumers of a device's events see them in order.
func TestEventsKeyedToJavaPartitions(t *testing.T) {
	t.Parallel()
	const parts = 4
	k := testenv.Kafka(t, parts, testTopic)
	p := newTestPublisher(t, k.Brokers(), DefaultConfig(), nil)
	ctx := testenv.Context(t, 30*time.Second)
	due := make([]shard.Member, 60)
	for i := range due {
		due[i] = shard.Member{ID: fmt.Sprintf("dev-%03d", i), Score: shard.Score(time.Now().UnixMilli(), 0)}
	}
	if err := p.Timeouts(ctx, 0, due, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	msgs := testenv.ReadTopic(t, k.Brokers(), testTopic, parts)
	if len(msgs) != len(due) {
		t.Fatalf("%d records, want %d", len(msgs), len(due))
	}
	used := map[int]bool{}
	for _, m := range msgs {
		used[m.Partition] = true
		if want := javaPartition(m.Key, parts); m.Partition != want {
			t.Errorf("%s on partition %d, Java's partitioner says %d", m.Key, m.Partition, want)
		}
	}
	if len(used) != parts {
		t.Errorf("records on %d of %d partitions", len(used), parts)
	}
}
