package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/schemareg"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// avroWriter registers the heartbeat schema (and a second version of it)
// in a registry in the process and encodes heartbeats with either.
type avroWriter struct {
	srv    *schemareg.Server
	v1, v2 func(id string, at time.Time) []byte
}

// heartbeatV2 is the heartbeat schema with one more optional field: a new
// schema, so a new id, which flatline must fetch when it first meets it.
var heartbeatV2 = strings.Replace(avro.HeartbeatSchema, `{"name": "parent"`, `{"name": "rssi", "type": ["null", "int"], "default": null},
    {"name": "parent"`, 1)

func newAvroWriter(t *testing.T) *avroWriter {
	t.Helper()
	srv, err := schemareg.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	enc := func(text string) func(string, time.Time) []byte {
		id, err := srv.Register(e2etest.Signals+"-value", text)
		if err != nil {
			t.Fatal(err)
		}
		schema, err := avro.ParseSchema(text)
		if err != nil {
			t.Fatal(err)
		}
		return func(dev string, at time.Time) []byte {
			b, err := avro.Encode(id, schema, map[string]any{"device_id": dev, "ts": at, "class": nil, "timeout_ms": nil,
				"rssi": nil, "parent": nil, "meta": map[string]any{"site": "s-1"}})
			if err != nil {
				panic(err)
			}
			return b
		}
	}
	return &avroWriter{srv: srv, v1: enc(avro.HeartbeatSchema), v2: enc(heartbeatV2)}
}

// avroIngest is the README's avro block, pointed at the test's registry.
func avroIngest(t *testing.T, url string) func(*configs.Config) {
	ingest := readmeShape(t, "avro").Ingest
	return func(c *configs.Config) {
		c.Ingest.Format, c.Ingest.From = ingest.Format, ingest.From
		c.Ingest.SchemaRegistry = ingest.SchemaRegistry
		c.Ingest.SchemaRegistry.URL = url
	}
}

// TestAvroShape is TestShapes for Avro values in the schema-registry wire
// format (Confluent's), with the README's block: each silence fires once,
// none falsely; a value of an id the registry does not know is
// dead-lettered as unknown_schema and one that is not the wire format as
// not_object.
func TestAvroShape(t *testing.T) {
	t.Parallel()
	w := newAvroWriter(t)
	run := e2etest.Scenario{Devices: 400, Silent: 40}.Start(t, avroIngest(t, w.srv.URL()))
	quiet := time.Now().Add(2 * time.Second)
	run.StartShapedFleet(t, nil, func(id string, now time.Time, _ string) *kgo.Record {
		return &kgo.Record{Key: []byte(id), Value: w.v1(id, now), Timestamp: now}
	}, "avro-", run.Schedule(rand.New(rand.NewPCG(5, 6)), quiet, quiet.Add(2*time.Second)))

	unknown := append([]byte{0, 0, 0, 0x7f, 0x7e}, w.v1("x", time.Now())[5:]...)
	e2etest.ProduceRecords(t, run.Kafka.Brokers(), e2etest.Signals,
		&kgo.Record{Key: []byte("bad-unknown"), Value: unknown},
		&kgo.Record{Key: []byte("bad-json"), Value: []byte(`{"device_id":"bad-json"}`)})

	v := run.Finish(t, 60*time.Second, e2etest.ExactlyOnce)
	t.Logf("avro: %v; lateness %s", v, e2etest.Spread(v.Late))
	dead := testenv.ReadTopic(t, run.Kafka.Brokers(), e2etest.DLQ, run.Partitions)
	want := map[string]string{"bad-unknown": "unknown_schema", "bad-json": "not_object"}
	if len(dead) != len(want) {
		t.Errorf("dead-letter topic holds %d records, want %d", len(dead), len(want))
	}
	for _, d := range dead {
		for _, h := range d.Headers {
			if h.Key == "flatline-reason" && want[string(d.Key)] != string(h.Value) {
				t.Errorf("dead letter %q: flatline-reason %q, want %q", d.Key, h.Value, want[string(d.Key)])
			}
		}
	}
}

// TestAvroRegistryOutageHoldsIngest: the registry goes away while values
// of a schema flatline has not fetched yet arrive. Ingest holds them —
// nothing dead-lettered, nothing committed past them, the devices not
// tracked — and /readyz answers 503 naming the registry; once it is back,
// they are read and /readyz is 200 again. Values of the schema already
// cached never needed it.
func TestAvroRegistryOutageHoldsIngest(t *testing.T) {
	t.Parallel()
	w := newAvroWriter(t)
	e := e2etest.NewEnv(t, 4)
	e.Cfg.HTTP.Addr = "127.0.0.1:0"
	avroIngest(t, w.srv.URL())(&e.Cfg)
	inst := e2etest.Start(t, e.Cfg, app.Hooks{})
	brokers := e.Kafka.Brokers()
	readyz := "http://" + inst.HTTP.Addr() + "/readyz"
	ctx := context.Background()

	beat := func(prefix string, enc func(string, time.Time) []byte) []string {
		var ids []string
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			id := fmt.Sprintf("%s%02d", prefix, i)
			ids = append(ids, id)
			recs = append(recs, &kgo.Record{Key: []byte(id), Value: enc(id, time.Now()), Timestamp: time.Now()})
		}
		e2etest.ProduceRecords(t, brokers, e2etest.Signals, recs...)
		return ids
	}
	tracked := func() int64 {
		n, err := inst.Store.Tracked(ctx, e.Cfg.Shards.InitialCount)
		if err != nil {
			return -1
		}
		return n
	}
	first := beat("v1-", w.v1)
	e2etest.Eventually(t, 20*time.Second, "the v1 devices tracked", func() bool { return tracked() == int64(len(first)) })
	e2etest.Eventually(t, 10*time.Second, "/readyz 200", func() bool { return e2etest.HTTPStatus(readyz) == 200 })

	w.srv.Stop()
	second := beat("v2-", w.v2)
	var body string
	e2etest.Eventually(t, 15*time.Second, "/readyz 503 naming the schema registry", func() bool {
		resp, err := http.Get(readyz)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "schema registry")
	})
	t.Logf("/readyz during the outage: %s", strings.TrimSpace(body))
	time.Sleep(2 * time.Second) // the registry stays away: nothing may move meanwhile
	if n := tracked(); n != int64(len(first)) {
		t.Errorf("%d devices tracked while the registry was away, want the %d of v1", n, len(first))
	}
	if testenv.CaughtUp(t, brokers, e.Cfg.Kafka.GroupID, e2etest.Signals, 4) {
		t.Error("the group committed past values it could not read")
	}
	if dead := testenv.ReadTopic(t, brokers, e2etest.DLQ, 4); len(dead) != 0 {
		t.Errorf("%d records dead-lettered during a registry outage", len(dead))
	}

	if err := w.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 20*time.Second, "the v2 devices tracked once the registry is back", func() bool { return tracked() == int64(len(first)+len(second)) })
	e2etest.Eventually(t, 10*time.Second, "/readyz 200 again", func() bool { return e2etest.HTTPStatus(readyz) == 200 })
	e2etest.Eventually(t, 10*time.Second, "every partition committed to its end", func() bool {
		return testenv.CaughtUp(t, brokers, e.Cfg.Kafka.GroupID, e2etest.Signals, 4)
	})
	if dead := testenv.ReadTopic(t, brokers, e2etest.DLQ, 4); len(dead) != 0 {
		t.Errorf("%d records dead-lettered", len(dead))
	}
}
