package app_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/app"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestStartRefusesWhatKafkaWouldNeverServe: a missing topic or a session
// timeout the brokers refuse is one start-up error naming it, not an
// instance that idles or retries forever behind a warning.
func TestStartRefusesWhatKafkaWouldNeverServe(t *testing.T) {
	rs := testenv.Redis(t)
	const signals, timeouts, dlq = "device-signals", "device-timeouts", "device-signals-dlq"
	cases := []struct {
		name   string
		topics []string
		edit   func(*configs.Config)
		want   string // "" = starts
	}{
		{"all there", []string{signals, timeouts, dlq}, nil, ""},
		{"signals topic missing", []string{timeouts, dlq}, nil, `topic "device-signals" (kafka.signals_topic) does not exist`},
		{"timeouts topic missing", []string{signals, dlq}, nil, `topic "device-timeouts" (kafka.timeouts_topic) does not exist`},
		{"dead-letter topic missing", []string{signals, timeouts}, nil, `topic "device-signals-dlq" (kafka.dead_letter_topic) does not exist`},
		{"dead-letter topic missing but disabled", []string{signals, timeouts}, func(c *configs.Config) { c.Kafka.DeadLetterTopic = "" }, ""},
		{"dead-letter topic missing, no ingest role", []string{signals, timeouts}, func(c *configs.Config) { c.Roles = []string{"scanner"} }, ""},
		{"session timeout below the brokers' floor", []string{signals, timeouts, dlq}, func(c *configs.Config) { c.Kafka.SessionTimeout = 50 * time.Millisecond },
			"kafka.session_timeout: 50ms is outside the brokers' group.min.session.timeout.ms and group.max.session.timeout.ms [100ms, 5m0s]"},
		{"session timeout above the brokers' ceiling", []string{signals, timeouts, dlq}, func(c *configs.Config) { c.Kafka.SessionTimeout = 10 * time.Minute },
			"kafka.session_timeout: 10m0s is outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := testenv.Kafka(t, 2, c.topics...)
			cfg := configs.Default()
			cfg.Redis.Addrs = []string{rs.Addr()}
			cfg.Redis.KeyPrefix = testenv.Prefix(t)
			cfg.Kafka.Brokers = k.Brokers()
			cfg.HTTP.Addr = ""
			if c.edit != nil {
				c.edit(&cfg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Hooks{})
			if a != nil {
				a.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused to start: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("started; want a refusal containing %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("refused with %q; want it to contain %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("refusal is more than one line: %q", err)
			}
		})
	}
}
