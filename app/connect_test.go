package app_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
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
			cfg := startConfig(t, []string{rs.Addr()}, k.Brokers())
			if c.edit != nil {
				c.edit(&cfg)
			}
			checkStart(t, startOnce(cfg, io.Discard), c.want)
		})
	}
}

// startConfig is the default configuration on redisAddrs and brokers, with
// a key prefix of the test's own and HTTP off.
func startConfig(t *testing.T, redisAddrs, brokers []string) configs.Config {
	cfg := configs.Default()
	cfg.Redis.Addrs = redisAddrs
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.Kafka.Brokers = brokers
	cfg.HTTP.Addr = ""
	return cfg
}

// startOnce starts an instance on cfg, logging to w, and closes what it
// started: it returns app.New's error.
func startOnce(cfg configs.Config, w io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(w, nil)), app.Hooks{})
	if a != nil {
		a.Close()
	}
	return err
}

// checkStart checks what startOnce returned: with want "" the instance
// must have started; otherwise it must have been refused, with one line
// that contains want and each of also. It reports whether it was refused.
func checkStart(t *testing.T, err error, want string, also ...string) (refused bool) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused to start: %v", err)
	case want != "" && err == nil:
		t.Fatalf("started; want a refusal containing %q", want)
	case err == nil:
		return false
	}
	for _, w := range append([]string{want}, also...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refused with %q; want it to contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("refusal is more than one line: %q", err)
	}
	return true
}

// TestStartRefusesAnEvictingRedis: serve refuses, with one line naming the
// policy and the fix, a Redis whose maxmemory-policy may evict deadlines
// (allkeys-*), whether it reads the policy with CONFIG GET or, where CONFIG
// is denied as on managed services, from INFO; it accepts noeviction and
// volatile-*, and warns when persistence is off, and when small sorted sets
// are listpacks (Redis's default 128 entries).
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
		small    bool // zset-max-listpack-entries as docs/operations.md asks
	}{
		{"noeviction", nil, false, "", false, false},
		{"noeviction, small listpacks", []string{"--zset-max-listpack-entries", "16"}, false, "", false, true},
		{"volatile-lru", []string{"--maxmemory-policy", "volatile-lru"}, false, "", false, false},
		{"volatile-ttl with aof", []string{"--maxmemory-policy", "volatile-ttl", "--appendonly", "yes"}, false, "", true, false},
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, false, "maxmemory-policy is allkeys-lru", false, false},
		{"allkeys-random", []string{"--maxmemory-policy", "allkeys-random"}, false, "maxmemory-policy is allkeys-random", false, false},
		{"allkeys-lfu, CONFIG denied", append([]string{"--maxmemory-policy", "allkeys-lfu"}, noConfig...), true, "maxmemory-policy is allkeys-lfu", false, false},
		{"volatile-lfu, CONFIG denied", append([]string{"--maxmemory-policy", "volatile-lfu"}, noConfig...), true, "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs := testenv.Redis(t, c.args...)
			cfg := startConfig(t, []string{rs.Addr()}, k.Brokers())
			if c.user {
				cfg.Redis.Username, cfg.Redis.Password = user, pw
			}
			cfg.Kafka.GroupID = "g-" + cfg.Redis.KeyPrefix
			var logs testenv.SyncBuffer
			if err := startOnce(cfg, &logs); checkStart(t, err, c.want, rs.Addr(), fix) {
				t.Logf("refused: %v", err)
				return
			}
			warned := strings.Contains(logs.String(), "level=WARN msg=\"Redis persistence is off")
			if c.persists == warned && !c.user {
				t.Errorf("persistence warning %v with persistence %v; log:\n%s", warned, c.persists, logs.String())
			}
			listpacks := strings.Contains(logs.String(), "set zset-max-listpack-entries 16")
			if c.small == listpacks && !c.user {
				t.Errorf("listpack warning %v with zset-max-listpack-entries 16 %v; log:\n%s", listpacks, c.small, logs.String())
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
	err := startOnce(startConfig(t, cl.Addrs()[:1], k.Brokers()), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "redis "+evicting.Addr()+": maxmemory-policy is allkeys-lfu") {
		t.Fatalf("started on a cluster whose master %s evicts: %v", evicting.Addr(), err)
	}
}
