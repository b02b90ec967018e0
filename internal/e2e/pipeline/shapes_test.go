package pipeline_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// readmeShape returns the ingest block the README gives for shape, loaded
// as a user would load it: the block alone in a configuration file.
func readmeShape(t *testing.T, shape string) configs.Config {
	t.Helper()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- shape: " + regexp.QuoteMeta(shape) + " -->\n```yaml\n(.*?)```")
	m := re.FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README has no ingest block for %s", shape)
	}
	file := testenv.File(t, "flatline.yaml", string(m[1]))
	cfg, err := configs.Load(configs.LoadOptions{File: file})
	if err != nil {
		t.Fatalf("the README's %s block: %v", shape, err)
	}
	return *cfg
}

// A shapeWriter writes the test's records the way a bridge does, with
// franz-go and by hand (base64, AMQP bytes): nothing of flatline's own
// decoding is used to make them.
type shapeWriter struct {
	// beat writes device id's heartbeat at now; odd says to make the key
	// what a bridge may leave there (null, a foreign id) where the shape
	// allows.
	beat func(id string, now time.Time, ts string, odd int) *kgo.Record
	// invalid are records this shape must dead-letter, with the reason.
	invalid []invalidRecord
}

type invalidRecord struct {
	rec    *kgo.Record
	reason decode.Reason
}

func amqpStr8(s string) []byte { return append([]byte{0xA1, byte(len(s))}, s...) }

func amqpTime(ms int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{0x83}, uint64(ms))
}

func emqx5Value(id, payload string, tsMs int64) []byte {
	return []byte(fmt.Sprintf(`{"id":"0006%x","clientid":%q,"username":"fleet","topic":"devices/%s/up","timestamp":%d,"qos":1,"flags":{"retain":false},"payload":%q}`,
		tsMs, id, id, tsMs, payload))
}

func emqx4Value(id, payload string, tsMs int64) []byte {
	return []byte(fmt.Sprintf(`{"client_id":%q,"topic":"devices/%s/up","qos":1,"node":"emqx@10.0.0.1","ts":%d,"payload":%q}`,
		id, id, tsMs, base64.StdEncoding.EncodeToString([]byte(payload))))
}

// oddKey is the key a bridge may write beside the id in the value: null,
// a gateway's id, or the device's own id.
func oddKey(id string, odd int) []byte {
	switch odd % 3 {
	case 0:
		return nil
	case 1:
		return []byte("gateway-7")
	}
	return []byte(id)
}

var shapeWriters = map[string]shapeWriter{
	"emqx5": {
		beat: func(id string, now time.Time, ts string, odd int) *kgo.Record {
			return &kgo.Record{Key: oddKey(id, odd), Value: emqx5Value(id, `{"ts":`+ts+`,"temp":21.5,"fw":"1.4.2"}`, now.UnixMilli()), Timestamp: now}
		},
		invalid: []invalidRecord{
			{&kgo.Record{Key: []byte("x"), Value: []byte(`{"topic":"devices/x/up","payload":"{}"}`)}, decode.ReasonNoDeviceID},
			{&kgo.Record{Value: emqx5Value("bad-payload", `21.5 C`, 1)}, decode.ReasonBadPayload},
			{&kgo.Record{Value: []byte(`{"clientid":"bad-nopayload"}`)}, decode.ReasonBadPayload},
			{&kgo.Record{Value: []byte(`{"clientid":7,"payload":"{}"}`)}, decode.ReasonBadType},
			{&kgo.Record{Value: []byte(`not json`)}, decode.ReasonNotObject},
		},
	},
	"emqx4": {
		beat: func(id string, now time.Time, ts string, odd int) *kgo.Record {
			return &kgo.Record{Key: oddKey(id, odd), Value: emqx4Value(id, `{"ts":`+ts+`}`, now.UnixMilli()), Timestamp: now}
		},
		invalid: []invalidRecord{
			{&kgo.Record{Value: []byte(`{"client_id":"bad-b64","payload":"not base64!"}`)}, decode.ReasonBadPayload},
			{&kgo.Record{Value: []byte(`{"clientid":"wrong-field","payload":"e30="}`)}, decode.ReasonNoDeviceID},
		},
	},
	"mqtt-topic": {
		beat: func(id string, now time.Time, ts string, odd int) *kgo.Record {
			// The raw payload, often not JSON at all.
			return &kgo.Record{Key: []byte("devices/" + id + "/up"), Value: []byte("\x02\x11" + ts), Timestamp: now}
		},
		invalid: []invalidRecord{
			{&kgo.Record{Key: []byte("sensors/lost/up"), Value: []byte("x")}, decode.ReasonNoDeviceID},
			{&kgo.Record{Value: []byte("x")}, decode.ReasonNoDeviceID},
			{&kgo.Record{Key: []byte("devices/\xff\xfe/up"), Value: []byte("x")}, decode.ReasonKeyNotUTF8},
		},
	},
	"azure": {
		beat: func(id string, now time.Time, ts string, odd int) *kgo.Record {
			return &kgo.Record{Key: oddKey(id, odd), Value: []byte(`{"temperature":21.5}`), Timestamp: now, Headers: []kgo.RecordHeader{
				{Key: "iothub-connection-auth-method", Value: amqpStr8(`{"scope":"device","type":"sas"}`)},
				{Key: "iothub-connection-device-id", Value: amqpStr8(id)},
				{Key: "iothub-enqueuedtime", Value: amqpTime(now.UnixMilli())},
			}}
		},
		invalid: []invalidRecord{
			{&kgo.Record{Key: []byte("no-header"), Value: []byte("{}")}, decode.ReasonNoDeviceID},
			{&kgo.Record{Value: []byte("{}"), Headers: []kgo.RecordHeader{{Key: "iothub-connection-device-id", Value: []byte{0xA1, 40, 'x'}}}}, decode.ReasonBadType},
		},
	},
}

// TestShapes runs the core promise on each shape of the README's "Real
// sources", configured with the README's own block: 400 devices beat every
// 200 ms with a 1 s timeout, as the bridge writes them (keys null, foreign
// or the id where the shape allows), and 40 go silent. Each silence fires
// exactly once, no live device fires, and every event is keyed and
// partitioned (murmur2, as Kafka's Java client) by the extracted id; the
// shape's invalid records reach the dead-letter topic with their reason,
// and nothing else does.
func TestShapes(t *testing.T) {
	for _, shape := range []string{"emqx5", "emqx4", "mqtt-topic", "azure"} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			w := shapeWriters[shape]
			ingest := readmeShape(t, shape).Ingest
			run := e2etest.Scenario{Devices: 400, Silent: 40}.Start(t, func(c *configs.Config) {
				c.Ingest.Format, c.Ingest.From = ingest.Format, ingest.From
				c.Ingest.Payload, c.Ingest.PayloadEncoding = ingest.Payload, ingest.PayloadEncoding
			})
			odd := 0
			beat := func(id string, now time.Time, ts string) *kgo.Record {
				odd++
				return w.beat(id, now, ts, odd)
			}
			quiet := time.Now().Add(2 * time.Second)
			f := run.StartShapedFleet(t, nil, beat, shape+"-", run.Schedule(rand.New(rand.NewPCG(3, 4)), quiet, quiet.Add(2*time.Second)))

			brokers := run.Kafka.Brokers()
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(e2etest.Signals))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for _, inv := range w.invalid {
				rec := *inv.rec
				if err := cl.ProduceSync(context.Background(), &rec).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}

			v := run.Finish(t, 60*time.Second, e2etest.ExactlyOnce)
			t.Logf("%s: %v; lateness %s", shape, v, e2etest.Spread(v.Late))
			part := kgo.StickyKeyPartitioner(nil).ForTopic(e2etest.Timeouts)
			for id, evs := range run.Events.ByDevice() {
				for _, r := range evs {
					if want := part.Partition(&kgo.Record{Key: []byte(id)}, run.Partitions); r.Partition != want {
						t.Errorf("%s: event in partition %d, murmur2 of the id says %d", id, r.Partition, want)
					}
				}
			}
			if f.Silent() != 40 {
				t.Fatalf("%d silent devices", f.Silent())
			}

			dead := testenv.ReadTopic(t, brokers, e2etest.DLQ, run.Partitions)
			if len(dead) != len(w.invalid) {
				t.Errorf("dead-letter topic holds %d records, want the shape's %d invalid ones", len(dead), len(w.invalid))
			}
			want := map[string]decode.Reason{}
			for _, inv := range w.invalid {
				want[string(inv.rec.Key)+"|"+string(inv.rec.Value)] = inv.reason
			}
			for _, d := range dead {
				var reason string
				for _, h := range d.Headers {
					if h.Key == "flatline-reason" {
						reason = string(h.Value)
					}
				}
				if r, ok := want[string(d.Key)+"|"+string(d.Value)]; !ok || string(r) != reason {
					t.Errorf("dead letter %.60q: flatline-reason %q, want %q", d.Value, reason, r)
				}
			}
			for _, inv := range w.invalid {
				if got := testutil.ToFloat64(run.Inst.Metrics.Invalid.WithLabelValues(string(inv.reason))); got < 1 {
					t.Errorf("flatline_heartbeats_invalid_total{reason=%q} = %v", inv.reason, got)
				}
			}
		})
	}
}
