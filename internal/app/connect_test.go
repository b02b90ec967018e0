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

// TestStartRefusesAnEvictingRedis: serve refuses, with one line naming the
// policy and the fix, a Redis whose maxmemory-policy may evict deadlines
// (allkeys-*), whether it reads the policy with CONFIG GET or, where CONFIG
// is denied as on managed services, from INFO; it accepts noeviction and
// volatile-*, and warns when persistence is off.
func TestStartRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	k := testenv.Kafka(t, 1, "device-signals", "device-timeouts", "device-signals-dlq")
	const user, pw = "no-config", "pw-no-config"
	noConfig := []string{"--user", user, "on", ">" + pw, "~*", "+@all", "-config"}
	const fix = "set maxmemory-policy noeviction (or a volatile-* policy)"
	cases := []struct {
		name     string
		args     []string
		user     bool
		want     string // "" = starts
		persists bool
	}{
		{"noeviction", nil, false, "", false},
		{"volatile-lru", []string{"--maxmemory-policy", "volatile-lru"}, false, "", false},
		{"volatile-ttl with aof", []string{"--maxmemory-policy", "volatile-ttl", "--appendonly", "yes"}, false, "", true},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, false, "maxmemory-policy is allkeys-lru", false},
		{"allkeys-random", []string{"--maxmemory-policy", "allkeys-random"}, false, "maxmemory-policy is allkeys-random", false},
		{"allkeys-lfu, CONFIG denied", append([]string{"--maxmemory-policy", "allkeys-lfu"}, noConfig...), true, "maxmemory-policy is allkeys-lfu", false},
		{"volatile-lfu, CONFIG denied", append([]string{"--maxmemory-policy", "volatile-lfu"}, noConfig...), true, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs := testenv.Redis(t, c.args...)
			cfg := configs.Default()
			cfg.Redis.Addrs = []string{rs.Addr()}
			cfg.Redis.KeyPrefix = testenv.Prefix(t)
			if c.user {
				cfg.Redis.Username, cfg.Redis.Password = user, pw
			}
			cfg.Kafka.Brokers = k.Brokers()
			cfg.Kafka.GroupID = "g-" + cfg.Redis.KeyPrefix
			cfg.HTTP.Addr = ""
			var logs testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)), app.Hooks{})
			if a != nil {
				a.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused to start: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("started; want a refusal containing %q", c.want)
			case c.want != "":
				for _, w := range []string{c.want, rs.Addr(), fix} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("refused with %q; want it to contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("refusal is more than one line: %q", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			warned := strings.Contains(logs.String(), "level=WARN msg=\"Redis persistence is off")
			if c.persists == warned && !c.user {
				t.Errorf("persistence warning %v with persistence %v; log:\n%s", warned, c.persists, logs.String())
			}
		})
	}
}

// TestStartChecksEveryClusterMaster: on a Redis Cluster the policy of every
// master counts, not only the one redis.addrs names.
func TestStartChecksEveryClusterMaster(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisCluster(t, 3)
	k := testenv.Kafka(t, 1, "device-signals", "device-timeouts", "device-signals-dlq")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evicting := cl.Nodes()[2]
	if err := evicting.Client(t).ConfigSet(ctx, "maxmemory-policy", "allkeys-lfu").Err(); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	cfg.Redis.Addrs = cl.Addrs()[:1]
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = k.Brokers()
	cfg.HTTP.Addr = ""
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), app.Hooks{})
	if a != nil {
		a.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "redis "+evicting.Addr()+": maxmemory-policy is allkeys-lfu") {
		t.Fatalf("started on a cluster whose master %s evicts: %v", evicting.Addr(), err)
	}
}
