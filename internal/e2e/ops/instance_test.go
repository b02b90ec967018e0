package ops

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// instance is a running flatline with its HTTP address.
type instance struct {
	*e2etest.Instance
	cfg  configs.Config
	base string // http://host:port
	env  *e2etest.Env
}

// startInstance runs one flatline instance against a private redis-server
// and an in-process Kafka, with its admin HTTP server on a free port.
func startInstance(t *testing.T, shards int) *instance {
	t.Helper()
	return startInstanceWith(t, shards, nil)
}

// startInstanceWith is startInstance with the configuration edited by edit
// (when not nil) and redis-server started with redisArgs; it returns the
// environment too.
func startInstanceWith(t *testing.T, shards int, edit func(*configs.Config), redisArgs ...string) *instance {
	t.Helper()
	e := e2etest.NewEnv(t, 4, redisArgs...)
	e.Cfg.Shards.InitialCount = shards
	e.Cfg.HTTP.Addr = "127.0.0.1:0"
	if edit != nil {
		edit(&e.Cfg)
	}
	in := e2etest.Start(t, e.Cfg, app.Hooks{})
	return &instance{Instance: in, cfg: e.Cfg, base: "http://" + in.HTTP.Addr(), env: e}
}

// heartbeat is one message for the signals topic; a nil value is sent as
// the raw bytes in raw.
type heartbeat struct {
	key       string
	timeoutMs int
	class     string
	raw       []byte
}

// send produces msgs to the signals topic and waits for the acks.
func (in *instance) send(t *testing.T, msgs []heartbeat) {
	t.Helper()
	out := make([]kafka.Message, len(msgs))
	now := time.Now().UnixMilli()
	for i, m := range msgs {
		v := m.raw
		if v == nil {
			body := map[string]any{"device_id": m.key, "ts": now}
			if m.timeoutMs > 0 {
				body["timeout_ms"] = m.timeoutMs
			}
			if m.class != "" {
				body["class"] = m.class
			}
			v, _ = json.Marshal(body)
		}
		out[i] = kafka.Message{Key: []byte(m.key), Value: v}
	}
	e2etest.Produce(t, in.cfg.Kafka.Brokers, e2etest.Signals, out...)
}

// status fetches /status.
func (in *instance) status(t *testing.T) statusDoc {
	t.Helper()
	var st statusDoc
	if err := json.Unmarshal(in.get(t, "/status"), &st); err != nil {
		t.Fatalf("decode /status: %v", err)
	}
	return st
}

type statusDoc struct {
	Instance string `json:"instance"`
	Layout   struct {
		Count int `json:"count"`
	} `json:"layout"`
	Tracked int64 `json:"tracked"`
	Down    int64 `json:"down"`
	Shards  []struct {
		Owner string `json:"owner"`
	} `json:"shards"`
}

func (in *instance) get(t *testing.T, path string) []byte {
	t.Helper()
	body, err := e2etest.HTTPGet(in.base + path)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// metrics is the instance's /metrics page, parsed.
func (in *instance) metrics(t *testing.T) e2etest.Metrics {
	t.Helper()
	m, err := e2etest.ParseMetrics(in.get(t, "/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// heartbeats returns one heartbeat for each of n devices named
// prefix0..prefix{n-1}.
func heartbeats(prefix string, n, timeoutMs int) []heartbeat {
	out := make([]heartbeat, n)
	for i := range out {
		out[i] = heartbeat{key: fmt.Sprintf("%s%d", prefix, i), timeoutMs: timeoutMs}
	}
	return out
}
