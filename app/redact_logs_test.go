package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestSecretsNotLogged runs an instance configured from the environment
// with a Redis password and Kafka SASL/SCRAM credentials, at debug level,
// through start-up, a heartbeat, an invalid message, a timeout and
// shutdown, and checks that neither password appears in its log, its
// /status or /metrics, nor in the start-up errors of wrong credentials.
func TestSecretsNotLogged(t *testing.T) {
	t.Parallel()
	const (
		redisPW = "redis-Log-s3cret"
		kafkaPW = "kafka-Log-s3cret"
		user    = "flatline-svc"
		signals = "device-signals"
	)
	rs := testenv.Redis(t, "--requirepass", redisPW)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, signals, "device-timeouts", "device-signals-dlq"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", user, kafkaPW))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	prefix := testenv.Prefix(t)
	env := []string{
		"FLATLINE_REDIS_ADDRS=" + rs.Addr(),
		"FLATLINE_REDIS_PASSWORD=" + redisPW,
		"FLATLINE_REDIS_KEY_PREFIX=" + prefix,
		"FLATLINE_KAFKA_BROKERS=" + strings.Join(kc.ListenAddrs(), ","),
		"FLATLINE_KAFKA_GROUP_ID=g-" + prefix,
		"FLATLINE_KAFKA_SASL_MECHANISM=SCRAM-SHA-256",
		"FLATLINE_KAFKA_SASL_USERNAME=" + user,
		"FLATLINE_KAFKA_SASL_PASSWORD=" + kafkaPW,
		"FLATLINE_TIMEOUTS_DEFAULT=1s",
		"FLATLINE_HTTP_ADDR=127.0.0.1:0",
		"FLATLINE_LOG_LEVEL=debug",
	}
	cfg, err := configs.Load(configs.LoadOptions{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	log := logging.New(cfg.Log, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Wrong credentials: start-up fails with an error that names the
	// problem, not the password.
	for _, c := range []struct {
		name   string
		mutate func(*configs.Config)
		secret string
	}{
		{"redis", func(c *configs.Config) { c.Redis.Password = "wrong-" + redisPW }, "wrong-" + redisPW},
		{"kafka", func(c *configs.Config) { c.Kafka.SASL.Password = "wrong-" + kafkaPW }, "wrong-" + kafkaPW},
	} {
		bad := *cfg
		c.mutate(&bad)
		bad.HTTP.Addr = ""
		a, err := app.New(ctx, bad, log, app.Hooks{})
		if err == nil {
			a.Close()
			t.Errorf("%s: started with a wrong password", c.name)
			continue
		}
		if strings.Contains(err.Error(), c.secret) || strings.Contains(err.Error(), redisPW) || strings.Contains(err.Error(), kafkaPW) {
			t.Errorf("%s: start-up error leaks a password: %v", c.name, err)
		}
	}

	a, err := app.New(ctx, *cfg, log, app.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	tr, err := cfg.Kafka.Transport()
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections() // the writer closes only a transport of its own
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Kafka.Brokers...), Topic: signals, Transport: tr, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	now := time.Now()
	if err := w.WriteMessages(ctx,
		kafka.Message{Key: []byte("log-dev"), Value: []byte(`{"ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`), Time: now},
		kafka.Message{Key: []byte("log-bad"), Value: []byte(`not json`), Time: now},
	); err != nil {
		t.Fatal(err)
	}
	dialer, err := cfg.Kafka.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: cfg.Kafka.Brokers, Topic: cfg.Kafka.TimeoutsTopic, Partition: 0, Dialer: dialer, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("no timeout event: %v", err)
	}
	var ev dispatch.Event
	if err := json.Unmarshal(m.Value, &ev); err != nil || ev.DeviceID != "log-dev" {
		t.Errorf("event %s (%v)", m.Value, err)
	}
	pages := ""
	for _, path := range []string{"/status", "/metrics", "/readyz"} {
		pages += get(t, "http://"+a.HTTP.Addr()+path)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}

	out := logs.String()
	if !strings.Contains(out, "flatline running") || !strings.Contains(out, "invalid heartbeat") {
		t.Fatalf("the log lacks the run's lines; did logging go elsewhere?\n%s", out)
	}
	for _, s := range []string{redisPW, kafkaPW, "s3cret"} {
		if strings.Contains(out, s) {
			t.Errorf("the log shows a password (%s):\n%s", s, out)
		}
		if strings.Contains(pages, s) {
			t.Errorf("an HTTP endpoint shows a password (%s)", s)
		}
	}
	t.Logf("%d log lines at debug level, no password in them", strings.Count(out, "\n"))
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
