package configs_test

import (
	"net"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/internal/testenv"
)

const (
	fileRedisSecret = "file-Redis-s3cret"
	envRedisSecret  = "env-Redis-s3cret"
	fileKafkaSecret = "file-Kafka-s3cret"
	envKafkaSecret  = "env-Kafka-s3cret"
)

// TestRedactedHidesSecrets: `flatline config print` (Config.Redacted) never
// shows redis.password or kafka.sasl.password, whether they come from the
// file or the environment, shows that they are set, and still loads back
// as a configuration file.
func TestRedactedHidesSecrets(t *testing.T) {
	t.Parallel()
	file := testenv.File(t, "flatline.yaml", `
redis:
  username: flatline-svc
  password: `+fileRedisSecret+`
kafka:
  sasl:
    mechanism: SCRAM-SHA-512
    username: flatline-kafka
    password: `+fileKafkaSecret+`
`)
	for _, c := range []struct {
		name        string
		env         []string
		redis, kafk string
	}{
		{"file", nil, fileRedisSecret, fileKafkaSecret},
		{"environment", []string{"FLATLINE_REDIS_PASSWORD=" + envRedisSecret, "FLATLINE_KAFKA_SASL_PASSWORD=" + envKafkaSecret}, envRedisSecret, envKafkaSecret},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := configs.Load(configs.LoadOptions{File: file, Env: c.env})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Redis.Password != c.redis || cfg.Kafka.SASL.Password != c.kafk {
				t.Fatalf("loaded passwords %q, %q; want %q, %q", cfg.Redis.Password, cfg.Kafka.SASL.Password, c.redis, c.kafk)
			}
			out, err := cfg.Redacted()
			if err != nil {
				t.Fatal(err)
			}
			text := string(out)
			for _, s := range []string{fileRedisSecret, envRedisSecret, fileKafkaSecret, envKafkaSecret, "s3cret"} {
				if strings.Contains(text, s) {
					t.Errorf("config print shows a secret (%s):\n%s", s, text)
				}
			}
			if n := strings.Count(text, "password: <redacted>"); n != 2 {
				t.Errorf("config print has %d redacted passwords, want 2:\n%s", n, text)
			}
			for _, s := range []string{"username: flatline-svc", "username: flatline-kafka", "mechanism: SCRAM-SHA-512"} {
				if !strings.Contains(text, s) {
					t.Errorf("config print lacks %q (only secrets are hidden)", s)
				}
			}
			back, err := configs.Load(configs.LoadOptions{File: testenv.File(t, "flatline.yaml", text)})
			if err != nil {
				t.Fatalf("the printed configuration does not load back: %v", err)
			}
			if back.Redis.Username != cfg.Redis.Username || back.Kafka.SASL.Mechanism != cfg.Kafka.SASL.Mechanism {
				t.Errorf("loaded back %+v / %+v", back.Redis, back.Kafka.SASL)
			}
		})
	}

	// An unset password prints empty, so "set" and "not set" stay apart.
	cfg := configs.Default()
	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "<redacted>") {
		t.Errorf("config print redacts unset passwords:\n%s", out)
	}
}

// TestSecretsNotEchoedByLoad: the loader's warnings and errors name keys
// and variables, never a password value, even a misplaced or mistyped one.
func TestSecretsNotEchoedByLoad(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-S3cret"
	cfg, err := configs.Load(configs.LoadOptions{Env: []string{
		"FLATLINE_REDIS_PASSWROD=" + secret, // a typo: warned about, by name
		"FLATLINE_KAFKA_SASL_PASWORD=" + secret,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 2 {
		t.Errorf("warnings %q, want one per unknown variable", cfg.Warnings)
	}
	for _, w := range cfg.Warnings {
		if strings.Contains(w, secret) {
			t.Errorf("warning echoes a secret: %s", w)
		}
	}
	for _, body := range []string{
		"redis:\n  password: [" + secret + "]\n",
		"redis:\n  password: {" + secret + ": 1}\n",
		"kafka:\n  sasl:\n    password: [" + secret + "]\n",
		"kafka:\n  sasl:\n    mechanism: PLAIN\n    password: " + secret + "\n", // no username
	} {
		_, err := configs.Load(configs.LoadOptions{File: testenv.File(t, "flatline.yaml", body)})
		if err == nil {
			t.Errorf("loaded %q", body)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error echoes a secret: %v", err)
		}
	}
}

// TestHTTPDefaultsToLoopback: the admin endpoints (/metrics, /status, …)
// listen on loopback unless configured otherwise, in the built-in defaults
// and in the documented flatline.yaml.
func TestHTTPDefaultsToLoopback(t *testing.T) {
	t.Parallel()
	documented, err := configs.Load(configs.LoadOptions{File: "flatline.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{
		"httpapi.DefaultConfig": httpapi.DefaultConfig().Addr,
		"configs.Default":       configs.Default().HTTP.Addr,
		"flatline.yaml":         documented.HTTP.Addr,
	} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s: http.addr %q: %v", name, addr, err)
			continue
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			t.Errorf("%s: http.addr %q is not a loopback address", name, addr)
		}
	}
}
