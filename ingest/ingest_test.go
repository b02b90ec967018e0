package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

const (
	signals = "device-signals"
	dlq     = "device-signals-dlq"
)

// rig is a running ingest over a private Redis and Kafka.
type rig struct {
	redis     *testenv.RedisServer
	kafka     *testenv.KafkaCluster
	kcfg      kafkaconn.Config
	store     *shard.Store
	metrics   *metrics.Metrics
	committed chan map[int]int64
	have      map[int]int64 // offsets committed so far, as the hook saw them
	raised    atomic.Int64  // times ingest handed watermarks to the local scanners (probe rounds included)
	// handed, if set before start, receives a copy of every non-empty
	// hand-over (dropped when full).
	handed chan map[int]int64
	stop   func()
}

func newRig(t *testing.T, redisArgs ...string) *rig {
	t.Helper()
	return newRigWith(t, ingest.DefaultConfig(), redisArgs...)
}

// newRigWith is newRig with an ingest configuration.
func newRigWith(t *testing.T, cfg ingest.Config, redisArgs ...string) *rig {
	t.Helper()
	r := newStoppedRig(t, redisArgs...)
	r.start(t, cfg)
	return r
}

// eachFormat runs test in a parallel subtest per heartbeat format, each on
// a rig of its own whose ingest runs with cfg: the default configuration,
// reading that format.
func eachFormat(t *testing.T, test func(t *testing.T, r *rig, cfg ingest.Config)) {
	t.Parallel()
	for _, format := range []decode.Format{decode.FormatJSON, decode.FormatKey} {
		t.Run(string(format), func(t *testing.T) {
			t.Parallel()
			cfg := ingest.DefaultConfig()
			cfg.Format = format
			test(t, newRigWith(t, cfg), cfg)
		})
	}
}

// newStoppedRig is a rig whose ingest is not started yet: set r.kcfg, then
// r.start.
func newStoppedRig(t *testing.T, redisArgs ...string) *rig {
	t.Helper()
	return newStoppedRigOn(t, testenv.Kafka(t, 4, signals, dlq, "device-timeouts"), redisArgs...)
}

// newStoppedRigOn is newStoppedRig on a Kafka cluster of the test's own,
// whose topics are the rig's (signals with 4 partitions).
func newStoppedRigOn(t *testing.T, k *testenv.KafkaCluster, redisArgs ...string) *rig {
	t.Helper()
	r := &rig{kafka: k, stop: func() {}}
	r.store, r.redis = testenv.Store(t, redisArgs...)
	r.kcfg = kafkaconn.DefaultConfig()
	r.kcfg.Brokers = r.kafka.Brokers()
	r.kcfg.GroupID = "g-" + testenv.Prefix(t)
	r.metrics = metrics.New(metrics.Options{})
	r.committed = make(chan map[int]int64, 1000)
	r.have = make(map[int]int64)
	return r
}

// start runs an ingest of the rig's consumer group; r.stop stops it.
func (r *rig) start(t *testing.T, cfg ingest.Config) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("FLATLINE_TEST_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w := rebalance.NewWatcher(rebalance.WatcherOptions{Store: r.store, Config: rebalance.DefaultConfig(), Log: log})
	if _, err := w.Init(ctx, 4); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.New(cfg, ingest.Options{
		Store: r.store, Layout: w, Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Kafka: r.kcfg,
		Metrics: r.metrics, Log: log,
		Raised: func(wms map[int]int64) {
			r.raised.Add(1)
			if r.handed != nil && len(wms) > 0 {
				select {
				case r.handed <- maps.Clone(wms):
				default:
				}
			}
		},
		Hooks: ingest.Hooks{Committed: func(o map[int]int64) {
			cp := make(map[int]int64, len(o))
			for p, off := range o {
				cp[p] = off
			}
			r.committed <- cp
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = in.Run(runCtx) }()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done; _ = in.Close() }) }
	t.Cleanup(r.stop)
}

// produce writes msgs and returns, per partition, the offset after them.
func (r *rig) produce(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(r.kafka.Brokers()...), Topic: signals, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// endOffsets returns the high-water mark of every signals partition.
func (r *rig) endOffsets(t *testing.T) map[int]int64 {
	t.Helper()
	return testenv.EndOffsets(t, r.kafka.Brokers(), signals, 4)
}

// committedOffsets reads the group's committed offsets from Kafka.
func (r *rig) committedOffsets(t *testing.T) map[int]int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(r.kafka.Brokers()...)}
	resp, err := c.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: r.kcfg.GroupID, Topics: map[string][]int{signals: {0, 1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]int64)
	for _, p := range resp.Topics[signals] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// waitCommitted waits until the committed offsets reach want.
func (r *rig) waitCommitted(t *testing.T, want map[int]int64) {
	t.Helper()
	have := r.have
	timeout := time.After(30 * time.Second)
	for {
		done := true
		for p, off := range want {
			if have[p] < off {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case o := <-r.committed:
			for p, off := range o {
				have[p] = off
			}
		case <-timeout:
			t.Fatalf("offsets committed %v, want %v", have, want)
		}
	}
}

func (r *rig) tracked(t *testing.T, id string) bool {
	t.Helper()
	_, ok, err := r.store.Score(context.Background(), shard.Of(shard.Hash(id), 4), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func beat(id string) kafka.Message {
	return kafka.Message{Key: []byte(id), Value: []byte(fmt.Sprintf(`{"device_id":%q,"ts":%d}`, id, time.Now().UnixMilli()))}
}

// Every class of invalid message lands in the dead-letter topic with its
// reason; the valid messages of the same batch are tracked; ingest goes on.
func TestInvalidMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	invalid := []struct {
		reason decode.Reason
		key    string
		value  string
	}{
		{decode.ReasonNotObject, "bad-json", `{"ts":`},
		{decode.ReasonNotObject, "bad-array", `[1,2]`},
		{decode.ReasonNotObject, "bad-null", `null`},
		{decode.ReasonTrailingData, "bad-trailing", `{"ts":1} x`},
		{decode.ReasonBadType, "bad-type", `{"class":7}`},
		{decode.ReasonBadTS, "bad-ts", `{"ts":"yesterday"}`},
		{decode.ReasonNoKey, "", `{"ts":1}`},
		{decode.ReasonKeyTooLong, strings.Repeat("k", 300), `{}`},
		{decode.ReasonKeyNotUTF8, "bad-\xff-utf8", `{}`},
		{decode.ReasonIDMismatch, "bad-id", `{"device_id":"other"}`},
		{decode.ReasonTooLarge, "bad-large", `{"pad":"` + strings.Repeat("x", 70<<10) + `"}`},
	}
	var msgs []kafka.Message
	for k, c := range invalid {
		msgs = append(msgs, kafka.Message{Key: []byte(c.key), Value: []byte(c.value)})
		msgs = append(msgs, beat(fmt.Sprintf("good-%02d", k)))
	}
	r.produce(t, msgs...)
	r.waitCommitted(t, r.endOffsets(t))

	for k := range invalid {
		if id := fmt.Sprintf("good-%02d", k); !r.tracked(t, id) {
			t.Errorf("valid device %s beside an invalid message is not tracked", id)
		}
	}
	// Read the dead-letter topic back: every invalid message, once, with its reason.
	got := make(map[string][]kafka.Message)
	dead := testenv.ReadTopic(t, r.kafka.Brokers(), dlq, 4)
	for _, m := range dead {
		got[string(m.Key)] = append(got[string(m.Key)], m)
	}
	n := len(dead)
	if n != len(invalid) {
		t.Errorf("dead-letter topic holds %d messages, want %d", n, len(invalid))
	}
	for _, c := range invalid {
		ms := got[c.key]
		if len(ms) != 1 {
			t.Errorf("%s: %d dead-lettered copies", c.reason, len(ms))
			continue
		}
		headers := map[string]string{}
		for _, h := range ms[0].Headers {
			headers[h.Key] = string(h.Value)
		}
		if headers["flatline-reason"] != string(c.reason) {
			t.Errorf("key %.20q: reason header %q, want %q", c.key, headers["flatline-reason"], c.reason)
		}
		if !strings.HasPrefix(headers["flatline-source"], signals+"/") || strings.Count(headers["flatline-source"], "/") != 2 {
			t.Errorf("%s: source header %q", c.reason, headers["flatline-source"])
		}
		if len(ms[0].Value) > ingest.DefaultConfig().MaxValueBytes {
			t.Errorf("%s: dead-lettered value of %d bytes not cut", c.reason, len(ms[0].Value))
		}
		if c.reason != decode.ReasonTooLarge && string(ms[0].Value) != c.value {
			t.Errorf("%s: value %q, want %q", c.reason, ms[0].Value, c.value)
		}
		if v := testutil.ToFloat64(r.metrics.Invalid.WithLabelValues(string(c.reason))); v < 1 {
			t.Errorf("metric for %s is %v", c.reason, v)
		}
	}
	// Ingest keeps going after the poison messages.
	r.produce(t, beat("after-poison"))
	r.waitCommitted(t, r.endOffsets(t))
	if !r.tracked(t, "after-poison") {
		t.Error("ingest stopped after invalid messages")
	}
}

// With Redis stopped no offset is committed; when Redis is back the same
// messages are processed and nothing is lost. (The instance stays in the
// group: leaving it, ingest.release_after, has tests of its own, and on a
// loaded machine it could leave before it fetched the messages.)
func TestRedisOutageCommitsNothing(t *testing.T) {
	t.Parallel()
	cfg := ingest.DefaultConfig()
	cfg.ReleaseAfter = 0
	r := newRigWith(t, cfg, "--appendonly", "yes", "--appendfsync", "always")
	var before []kafka.Message
	for i := 0; i < 100; i++ {
		before = append(before, beat(fmt.Sprintf("before-%03d", i)))
	}
	r.produce(t, before...)
	r.waitCommitted(t, r.endOffsets(t))
	committedBefore := r.committedOffsets(t)

	r.redis.Stop()
	errsBefore := testutil.ToFloat64(r.metrics.IngestErrors)
	var during []kafka.Message
	for i := 0; i < 100; i++ {
		during = append(during, beat(fmt.Sprintf("during-%03d", i)))
	}
	r.produce(t, during...)
	// Wait until ingest has tried, and failed, to write them.
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(r.metrics.IngestErrors) < errsBefore+3 {
		if time.Now().After(deadline) {
			t.Fatal("ingest never attempted the writes during the outage")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := r.committedOffsets(t); fmt.Sprint(got) != fmt.Sprint(committedBefore) {
		t.Fatalf("offsets committed during the Redis outage: %v, before %v", got, committedBefore)
	}
	select {
	case o := <-r.committed:
		t.Fatalf("commit hook ran during the outage: %v", o)
	default:
	}

	r.redis.Start()
	r.waitCommitted(t, r.endOffsets(t))
	// Checked through a new client: the rig's, shared with ingest, may
	// still answer with its last dial error (go-redis redials in the
	// background) although ingest, retrying, has written everything.
	r.store = shard.NewStore(r.redis.Client(t), r.store.Keys())
	for _, m := range append(before, during...) {
		if !r.tracked(t, string(m.Key)) {
			t.Errorf("%s lost across the Redis outage", m.Key)
		}
	}
}

// A dead-letter topic whose max.message.bytes is smaller than the invalid
// records flatline copies to it (here 8 KiB against 40 KiB keys and values)
// must not hold the signals partitions: each dead letter is cut to fit,
// each request stays under the limit, and the valid heartbeats beside them
// are tracked. (With kafka-go's defaults the writer sent them whole and
// the broker refused them on every retry.)
func TestDeadLettersFitTheTopicsMaxMessageBytes(t *testing.T) {
	t.Parallel()
	r := newStoppedRig(t)
	testenv.SetTopicConfig(t, r.kafka.Brokers(), dlq, "max.message.bytes", "8192")
	r.kcfg.DeadLetterTopic = dlq
	r.start(t, ingest.DefaultConfig())
	var msgs []kafka.Message
	for k := 0; k < 8; k++ {
		msgs = append(msgs,
			kafka.Message{Key: []byte(strings.Repeat("k", 40<<10) + strconv.Itoa(k)), Value: []byte(`[` + strings.Repeat("1,", 20<<10) + `1]`)},
			beat(fmt.Sprintf("fit-%02d", k)))
	}
	r.produce(t, msgs...)
	ctx := testenv.Context(t, 30*time.Second)
	for k := 0; k < 8; k++ {
		id := fmt.Sprintf("fit-%02d", k)
		for !r.tracked(t, id) {
			if ctx.Err() != nil {
				t.Fatalf("valid device %s beside an oversized invalid record never tracked: the partition is held", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Dead letters go out after the batch's Redis write, before its commit.
	r.waitCommitted(t, r.endOffsets(t))
	dead := testenv.ReadTopic(t, r.kafka.Brokers(), dlq, 4)
	if len(dead) != 8 {
		t.Errorf("dead-letter topic holds %d records, want the 8 invalid ones", len(dead))
	}
	for _, m := range dead {
		if n := len(m.Key) + len(m.Value); n > 8192 {
			t.Errorf("a dead letter of %d bytes in an 8 KiB topic", n)
		}
	}
}
