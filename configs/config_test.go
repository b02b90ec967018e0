package configs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// loadsClean fails unless Load takes opts without an error or a warning
// into a config check accepts; input names what was loaded in the report.
func loadsClean(t *testing.T, opts LoadOptions, input string, check func(*Config) bool) {
	t.Helper()
	cfg, err := Load(opts)
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if !check(cfg) {
		t.Errorf("unexpected config for %s: %+v", input, *cfg)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("Warnings = %v", cfg.Warnings)
	}
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	cfg, err := Load(LoadOptions{})
	if err != nil {
		t.Fatalf("Load(no sources) = %v", err)
	}
	if !reflect.DeepEqual(*cfg, Default()) {
		t.Errorf("Load(no sources) = %+v, want Default() %+v", *cfg, Default())
	}
}

// documented is flatline.yaml: every key with a comment and its default.
func documented(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("flatline.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestDocumentedIsDefault(t *testing.T) {
	t.Parallel()
	cfg, err := Load(LoadOptions{File: "flatline.yaml"})
	if err != nil {
		t.Fatalf("Load(flatline.yaml) = %v", err)
	}
	if !reflect.DeepEqual(*cfg, Default()) {
		t.Errorf("flatline.yaml loads as\n%+v\nwant Default()\n%+v", *cfg, Default())
	}
}

// TestDocumentedListsEveryKey makes flatline.yaml set every key explicitly
// with a comment of its own: loading it equal to Default() alone would not
// notice an undocumented key, which silently takes its default.
func TestDocumentedListsEveryKey(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	if err := yaml.Unmarshal(documented(t), &doc); err != nil {
		t.Fatal(err)
	}
	var found []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := strings.TrimPrefix(prefix+"."+k.Value, ".")
			if schema.groups[path] {
				walk(v, path)
				continue
			}
			found = append(found, path)
			if strings.TrimSpace(k.HeadComment) == "" && strings.TrimSpace(k.LineComment) == "" {
				t.Errorf("flatline.yaml: %s has no comment", path)
			}
		}
	}
	walk(doc.Content[0], "")
	want := Keys()
	slices.Sort(found)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("flatline.yaml keys:\n%v\nwant every key:\n%v", found, want)
	}
}

func TestKeysAndEnvNames(t *testing.T) {
	t.Parallel()
	for key, env := range map[string]string{
		"redis.addrs":         "FLATLINE_REDIS_ADDRS",
		"redis.key_prefix":    "FLATLINE_REDIS_KEY_PREFIX",
		"kafka.sasl.password": "FLATLINE_KAFKA_SASL_PASSWORD",
		"kafka.brokers":       "FLATLINE_KAFKA_BROKERS",
		"scanner.batch_size":  "FLATLINE_SCANNER_BATCH_SIZE",
		"shutdown_timeout":    "FLATLINE_SHUTDOWN_TIMEOUT",
		"timeouts.classes":    "FLATLINE_TIMEOUTS_CLASSES",
		"redis.tls.ca_file":   "FLATLINE_REDIS_TLS_CA_FILE",
	} {
		if got := EnvName(key); got != env {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, env)
		}
	}
	if got := EnvName("redis"); got != "" {
		t.Errorf("EnvName(section) = %q, want empty", got)
	}
	for _, secret := range []string{"redis.password", "kafka.sasl.password"} {
		if !slices.Contains(Keys(), secret) {
			t.Errorf("secret key %s is not a key", secret)
		}
	}
	// A password added to a section must be redacted too.
	for _, k := range Keys() {
		if strings.HasSuffix(k, "password") && !secretKeys[k] {
			t.Errorf("%s is not among the secrets config print redacts", k)
		}
	}
	for k := range secretKeys {
		if !slices.Contains(Keys(), k) {
			t.Errorf("secret key %s is not a key", k)
		}
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		check func(c *Config) bool
	}{
		{"empty file", "", func(c *Config) bool { return reflect.DeepEqual(*c, Default()) }},
		{"only comments", "# nothing\n", func(c *Config) bool { return reflect.DeepEqual(*c, Default()) }},
		{"null section", "scanner:\n", func(c *Config) bool { return reflect.DeepEqual(c.Scanner, Default().Scanner) }},
		{"list", "redis:\n  addrs: [a:1, b:2, c:3]\n", func(c *Config) bool {
			return slices.Equal(c.Redis.Addrs, []string{"a:1", "b:2", "c:3"})
		}},
		{"list replaces default", "kafka:\n  brokers:\n    - k:9092\n", func(c *Config) bool {
			return slices.Equal(c.Kafka.Brokers, []string{"k:9092"})
		}},
		{"durations", "scanner:\n  interval: 1500ms\n  grace: 0\ndispatch:\n  recovery_window: 0s\n", func(c *Config) bool {
			return c.Scanner.Interval == 1500*time.Millisecond && c.Scanner.Grace == 0 && c.Dispatch.RecoveryWindow == 0
		}},
		{"ints and bools", "scanner:\n  batch_size: 100\ntimeouts:\n  strict_classes: true\nredis:\n  tls:\n    enabled: true\n", func(c *Config) bool {
			return c.Scanner.BatchSize == 100 && c.Timeouts.StrictClasses && c.Redis.TLS.Enabled
		}},
		{"classes", "timeouts:\n  classes:\n    sensor: 30s\n    gateway: 2m\n    v1.cam: 90s\n", func(c *Config) bool {
			return reflect.DeepEqual(c.Timeouts.Classes, map[string]time.Duration{"sensor": 30 * time.Second, "gateway": 2 * time.Minute, "v1.cam": 90 * time.Second})
		}},
		{"empty classes", "timeouts:\n  classes: {}\n", func(c *Config) bool { return c.Timeouts.Classes == nil }},
		{"string keeps its text", "redis:\n  password: 0123\nkafka:\n  sasl:\n    password: 0x1F\n", func(c *Config) bool {
			return c.Redis.Password == "0123" && c.Kafka.SASL.Password == "0x1F"
		}},
		{"null string is empty", "kafka:\n  dead_letter_topic:\n", func(c *Config) bool { return c.Kafka.DeadLetterTopic == "" }},
		{"named string type", "ingest:\n  format: key\n", func(c *Config) bool { return c.Ingest.Format == "key" }},
		{"roles", "roles: [scanner]\ninstance_id: pod-7\nshutdown_timeout: 30s\n", func(c *Config) bool {
			return slices.Equal(c.Roles, []string{"scanner"}) && c.InstanceID == "pod-7" && c.ShutdownTimeout == 30*time.Second &&
				c.HasRole(RoleScanner) && !c.HasRole(RoleIngest)
		}},
		{"aliases", "timeouts:\n  default: &t 90s\n  classes:\n    sensor: *t\n", func(c *Config) bool {
			return c.Timeouts.Default == 90*time.Second && c.Timeouts.Classes["sensor"] == 90*time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loadsClean(t, LoadOptions{File: testenv.File(t, "flatline.yaml", tt.yaml)}, "\n"+tt.yaml+"\n", tt.check)
		})
	}
}

func TestLoadEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		check func(c *Config) bool
	}{
		{"list", []string{"FLATLINE_REDIS_ADDRS=r1:6379, r2:6379,r3:6379,"}, func(c *Config) bool {
			return slices.Equal(c.Redis.Addrs, []string{"r1:6379", "r2:6379", "r3:6379"})
		}},
		{"underscored key", []string{"FLATLINE_REDIS_KEY_PREFIX=fl-prod"}, func(c *Config) bool { return c.Redis.KeyPrefix == "fl-prod" }},
		{"nested secret", []string{"FLATLINE_KAFKA_SASL_MECHANISM=PLAIN", "FLATLINE_KAFKA_SASL_USERNAME=u", "FLATLINE_KAFKA_SASL_PASSWORD=p=w,d"}, func(c *Config) bool {
			return c.Kafka.SASL.Password == "p=w,d" && c.Kafka.SASL.Username == "u"
		}},
		{"int", []string{"FLATLINE_SCANNER_BATCH_SIZE=50"}, func(c *Config) bool { return c.Scanner.BatchSize == 50 }},
		{"top-level duration", []string{"FLATLINE_SHUTDOWN_TIMEOUT=45s"}, func(c *Config) bool { return c.ShutdownTimeout == 45*time.Second }},
		{"bool", []string{"FLATLINE_TIMEOUTS_STRICT_CLASSES=true", "FLATLINE_KAFKA_TLS_ENABLED=1"}, func(c *Config) bool {
			return c.Timeouts.StrictClasses && c.Kafka.TLS.Enabled
		}},
		{"classes", []string{"FLATLINE_TIMEOUTS_CLASSES=sensor=30s, gateway=2m"}, func(c *Config) bool {
			return reflect.DeepEqual(c.Timeouts.Classes, map[string]time.Duration{"sensor": 30 * time.Second, "gateway": 2 * time.Minute})
		}},
		{"empty string disables", []string{"FLATLINE_KAFKA_DEAD_LETTER_TOPIC="}, func(c *Config) bool { return c.Kafka.DeadLetterTopic == "" }},
		{"roles", []string{"FLATLINE_ROLES=ingest"}, func(c *Config) bool { return slices.Equal(c.Roles, []string{"ingest"}) }},
		{"first wins like getenv", []string{"FLATLINE_LOG_LEVEL=debug", "FLATLINE_LOG_LEVEL=error"}, func(c *Config) bool { return c.Log.Level == "debug" }},
		{"other variables ignored", []string{"PATH=/bin", "HOME=/root", "flatline_log_level=debug", "NOEQUALS"}, func(c *Config) bool {
			return reflect.DeepEqual(*c, Default())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loadsClean(t, LoadOptions{Env: tt.env}, fmt.Sprintf("%q", tt.env), tt.check)
		})
	}
}

func TestUnknownEnvIsWarning(t *testing.T) {
	t.Parallel()
	cfg, err := Load(LoadOptions{Env: []string{"FLATLINE_SCANER_INTERVAL=1s", "FLATLINE_REDIS_TLS=true", "FLATLINE_LOG_LEVEL=warn"}})
	if err != nil {
		t.Fatalf("Load = %v", err)
	}
	if cfg.Log.Level != "warn" {
		t.Errorf("known variable beside unknown ones not applied: log.level = %q", cfg.Log.Level)
	}
	want := []string{
		"environment variable FLATLINE_REDIS_TLS is not a flatline setting; ignored",
		"environment variable FLATLINE_SCANER_INTERVAL is not a flatline setting; ignored (did you mean FLATLINE_SCANNER_INTERVAL?)",
	}
	if len(cfg.Warnings) != len(want) {
		t.Fatalf("Warnings = %q, want %q", cfg.Warnings, want)
	}
	for i := range want {
		if cfg.Warnings[i] != want[i] {
			t.Errorf("Warnings[%d] = %q, want %q", i, cfg.Warnings[i], want[i])
		}
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := testenv.File(t, "flatline.yaml", "log:\n  level: warn\n  format: json\nscanner:\n  batch_size: 30\n  interval: 200ms\ntimeouts:\n  classes:\n    a: 10s\n    b: 20s\n")
	env := []string{"FLATLINE_SCANNER_BATCH_SIZE=40", "FLATLINE_LOG_LEVEL=error", "FLATLINE_TIMEOUTS_CLASSES=c=30s"}
	set := map[string]string{"log.level": "debug"}

	cfg, err := Load(LoadOptions{File: file, Env: env, Set: set})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"log.format (file over default)", cfg.Log.Format, "json"},
		{"scanner.interval (file over default)", cfg.Scanner.Interval, 200 * time.Millisecond},
		{"scanner.batch_size (env over file)", cfg.Scanner.BatchSize, 40},
		{"log.level (set over env over file)", cfg.Log.Level, "debug"},
		{"timeouts.classes (env replaces file's map)", cfg.Timeouts.Classes, map[string]time.Duration{"c": 30 * time.Second}},
		{"scanner.lease_ttl (default)", cfg.Scanner.LeaseTTL, 5 * time.Second},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	cfg, err := Load(LoadOptions{Set: map[string]string{
		"redis.addrs": "a:1,b:2", "timeouts.classes": "x=5s", "http.addr": "", "ingest.batch_size": "10",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Redis.Addrs, []string{"a:1", "b:2"}) || cfg.Timeouts.Classes["x"] != 5*time.Second ||
		cfg.HTTP.Addr != "" || cfg.Ingest.BatchSize != 10 {
		t.Errorf("Set not applied: %+v", *cfg)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string            // file body; "" = no file
		env  []string          // environment
		set  map[string]string // flags
		want []string          // substrings of the error
	}{
		// Wrong types in the file name the key and the line.
		{name: "bad duration", yaml: "scanner:\n  interval: fast\n", want: []string{`line 2: scanner.interval: invalid duration "fast"`}},
		{name: "bare number as duration", yaml: "timeouts:\n  default: 60\n", want: []string{`timeouts.default: want a duration such as "1500ms", got 60`}},
		{name: "bad int", yaml: "scanner:\n  batch_size: twenty\n", want: []string{`scanner.batch_size: want an integer, got "twenty"`}},
		{name: "quoted int", yaml: "scanner:\n  batch_size: \"20\"\n", want: []string{`scanner.batch_size: want an integer, got the string "20"`}},
		{name: "float as int", yaml: "ingest:\n  max_value_bytes: 1.5\n", want: []string{`ingest.max_value_bytes: want an integer, got 1.5`}},
		{name: "int overflow", yaml: "redis:\n  db: 99999999999999999999\n", want: []string{`redis.db: want an integer`}},
		{name: "bad bool", yaml: "timeouts:\n  strict_classes: yes\n", want: []string{`timeouts.strict_classes: want true or false, got "yes"`}},
		{name: "scalar for list", yaml: "redis:\n  addrs: a:6379\n", want: []string{`redis.addrs: want a YAML list, got "a:6379"`}},
		{name: "list for scalar", yaml: "log:\n  level: [debug]\n", want: []string{`log.level: want a string, got a list`}},
		{name: "mapping in list", yaml: "kafka:\n  brokers:\n    - {host: a}\n", want: []string{`kafka.brokers: item 0: want a string, got a mapping`}},
		{name: "scalar for section", yaml: "scanner: fast\n", want: []string{`line 1: scanner: want a mapping of keys, got "fast"`}},
		{name: "list for classes", yaml: "timeouts:\n  classes: [a]\n", want: []string{`timeouts.classes: want a YAML mapping of name: duration such as "1500ms", got a list`}},
		{name: "bad class duration", yaml: "timeouts:\n  classes:\n    sensor: soon\n", want: []string{`line 3: timeouts.classes.sensor: invalid duration "soon"`}},
		{name: "odd class name", yaml: "timeouts:\n  classes:\n    \"a b\": soon\n", want: []string{`timeouts.classes["a b"]: invalid duration "soon"`}},
		{name: "top level list", yaml: "- a\n- b\n", want: []string{`line 1: want a mapping of keys at the top level, got a list`}},
		{name: "syntax", yaml: "scanner:\n  interval: 1s\n   batch_size: 2\n", want: []string{`config file "`, `line 3`}},
		{name: "duplicate key", yaml: "scanner:\n  interval: 1s\n  interval: 2s\n", want: []string{`line 3: duplicate key "scanner.interval" (first at line 2)`}},
		{name: "duplicate class", yaml: "timeouts:\n  classes:\n    a: 1s\n    a: 2s\n", want: []string{`duplicate key timeouts.classes.a`}},
		{name: "two documents", yaml: "log:\n  level: info\n---\nlog:\n  level: debug\n", want: []string{`holds more than one YAML document`}},
		{name: "merge key", yaml: "base: &b {interval: 1s}\nscanner:\n  <<: *b\n", want: []string{`unknown key "base"`}},
		{name: "merge key in section", yaml: "scanner:\n  <<: {interval: 1s}\n", want: []string{`YAML merge keys (<<) are not supported`}},

		// Unknown keys.
		{name: "unknown key", yaml: "scanner:\n  batchsize: 10\n", want: []string{`line 2: unknown key "scanner.batchsize" (did you mean "scanner.batch_size"?)`}},
		{name: "unknown section", yaml: "scaner:\n  interval: 1s\n", want: []string{`unknown key "scaner" (did you mean "scanner"?)`}},
		{name: "key in wrong section", yaml: "scanner:\n  max_skew: 1s\n", want: []string{`unknown key "scanner.max_skew" (did you mean "ingest.max_skew"?)`}},
		{name: "unknown nested", yaml: "kafka:\n  sasl:\n    pass: x\n", want: []string{`unknown key "kafka.sasl.pass"`}},
		{name: "section as set key", set: map[string]string{"redis": "x"}, want: []string{`"redis" is a section, not a key`}},
		{name: "unknown set key", set: map[string]string{"log.lvl": "debug"}, want: []string{`unknown key "log.lvl" (did you mean "log.level"?)`}},

		// Environment errors name the variable and the key.
		{name: "env duration", env: []string{"FLATLINE_SCANNER_INTERVAL=fast"}, want: []string{`environment variable FLATLINE_SCANNER_INTERVAL: scanner.interval: invalid duration "fast"`}},
		{name: "env int", env: []string{"FLATLINE_SCANNER_BATCH_SIZE=lots"}, want: []string{`environment variable FLATLINE_SCANNER_BATCH_SIZE: scanner.batch_size: want an integer, got "lots"`}},
		{name: "env empty int", env: []string{"FLATLINE_REDIS_DB="}, want: []string{`FLATLINE_REDIS_DB: redis.db: want an integer, got ""`}},
		{name: "env bool", env: []string{"FLATLINE_REDIS_TLS_ENABLED=yes"}, want: []string{`FLATLINE_REDIS_TLS_ENABLED: redis.tls.enabled: want true or false, got "yes"`}},
		{name: "env classes pair", env: []string{"FLATLINE_TIMEOUTS_CLASSES=sensor:30s"}, want: []string{`FLATLINE_TIMEOUTS_CLASSES: timeouts.classes: want name=value pairs separated by commas, got "sensor:30s"`}},
		{name: "env classes duration", env: []string{"FLATLINE_TIMEOUTS_CLASSES=sensor=30"}, want: []string{`FLATLINE_TIMEOUTS_CLASSES: timeouts.classes: sensor: invalid duration "30"`}},
		{name: "env classes duplicate", env: []string{"FLATLINE_TIMEOUTS_CLASSES=a=1s,a=2s"}, want: []string{`timeouts.classes: "a" given twice`}},
		{name: "set duration", set: map[string]string{"scanner.grace": "soon"}, want: []string{`scanner.grace: invalid duration "soon"`}},

		// Values of the right type that a stage's Validate refuses; the
		// error says where the value came from.
		{name: "out of range from file", yaml: "scanner:\n  batch_size: 0\n", want: []string{`scanner.batch_size: must be within [1, 10000], got 0 (from config file "`, `", line 2)`}},
		{name: "out of range from env", env: []string{"FLATLINE_SCANNER_BATCH_SIZE=0"}, want: []string{`scanner.batch_size: must be within [1, 10000], got 0 (from environment variable FLATLINE_SCANNER_BATCH_SIZE)`}},
		{name: "out of range from flag", set: map[string]string{"scanner.lease_ttl": "1ms"}, want: []string{`scanner.lease_ttl: must be within [500ms, 10m], got 1ms (from the command line)`}},
		{name: "shard count", yaml: "shards:\n  initial_count: 24\n", want: []string{`shards.initial_count: must be a power of two`}},
		{name: "empty addrs", yaml: "redis:\n  addrs: []\n", want: []string{`redis.addrs: at least one address is required`}},
		{name: "key prefix", env: []string{"FLATLINE_REDIS_KEY_PREFIX={x}"}, want: []string{`redis.key_prefix: must be non-empty without braces`}},
		{name: "wait replicas", yaml: "redis:\n  wait_replicas: -1\n", want: []string{`redis.wait_replicas: must not be negative, got -1`}},
		{name: "wait timeout", env: []string{"FLATLINE_REDIS_WAIT_TIMEOUT=0s"}, want: []string{`redis.wait_timeout: must be positive, got 0s`}},
		{name: "kafka topic", yaml: "kafka:\n  timeouts_topic: device-signals\n", want: []string{`kafka.timeouts_topic: must differ from kafka.signals_topic`}},
		{name: "dlq is signals", yaml: "kafka:\n  dead_letter_topic: device-signals\n", want: []string{`kafka.dead_letter_topic: must differ from kafka.signals_topic`}},
		{name: "dlq is timeouts", yaml: "kafka:\n  dead_letter_topic: device-timeouts\n", want: []string{`kafka.dead_letter_topic: must differ from kafka.timeouts_topic`}},
		{name: "sasl mechanism", yaml: "kafka:\n  sasl:\n    mechanism: OAUTH\n", want: []string{`kafka.sasl.mechanism: want PLAIN`}},
		{name: "tls files", yaml: "redis:\n  tls:\n    enabled: true\n    ca_file: /nonexistent/ca.pem\n", want: []string{`redis.tls.ca_file: `}},
		{name: "ingest format", yaml: "ingest:\n  format: xml\n", want: []string{`ingest.format: want json, key or avro, got "xml"`}},
		{name: "ingest.from regex", yaml: "ingest:\n  from:\n    device_id: key:^devices/\n", want: []string{`ingest.from.device_id: "key:^devices/": the regex needs a capture group`, `(from config file`}},
		{name: "ingest.from under format key", env: []string{"FLATLINE_INGEST_FORMAT=key", "FLATLINE_INGEST_FROM_TS=value:time"}, want: []string{`ingest.from.ts: "value:time" reads the value, which ingest.format: key does not read`}},
		{name: "ingest.payload", yaml: "ingest:\n  from:\n    ts: payload:ts\n", want: []string{`ingest.from.ts: "payload:ts" needs ingest.payload`}},
		{name: "class out of bounds", yaml: "timeouts:\n  classes:\n    sensor: 200h\n", want: []string{`timeouts.classes.sensor: must be within [1s, 168h0m0s], got 200h0m0s`, `(from config file`}},
		{name: "log level", env: []string{"FLATLINE_LOG_LEVEL=loud"}, want: []string{`log.level: want debug, info, warn or error, got "loud"`}},
		{name: "http addr", yaml: "http:\n  addr: nope\n", want: []string{`http.addr: `}},
		{name: "negative recovery window", yaml: "dispatch:\n  recovery_window: -1s\n", want: []string{`dispatch.recovery_window: must not be negative`}},
		{name: "scanner interval", yaml: "scanner:\n  interval: 2m\n", want: []string{`scanner.interval: must be within [1ms, 1m], got 2m0s`}},
		{name: "storm max hold", yaml: "storm:\n  max_hold: 25h\n", want: []string{`storm.max_hold: must be within [0, 24h], got 25h0m0s`}},
		{name: "storm min devices", yaml: "storm:\n  min_devices: 0\n", want: []string{`storm.min_devices: must be within [1, 1000000], got 0`}},
		{name: "dispatch linger", yaml: "dispatch:\n  linger: 2s\n", want: []string{`dispatch.linger: must be within [0, 1s], got 2s`}},
		{name: "poll interval", yaml: "shards:\n  poll_interval: 1ms\n", want: []string{`shards.poll_interval: must be within [10ms, 1s], got 1ms`}},
		{name: "session timeout", yaml: "kafka:\n  session_timeout: 1h\n", want: []string{`kafka.session_timeout: must be within [1s, 5m], got 1h0m0s`}},

		// Rules across sections and the top-level keys.
		{name: "skew not below min", yaml: "ingest:\n  max_skew: 1s\n", want: []string{`ingest.max_skew: must be below timeouts.min (1s), got 1s`}},
		{name: "min below skew", env: []string{"FLATLINE_TIMEOUTS_MIN=200ms"}, want: []string{`ingest.max_skew: must be below timeouts.min (200ms), got 500ms`}},
		{name: "release_after too short", yaml: "ingest:\n  release_after: 10ms\n", want: []string{`ingest.release_after: must be 0 (never leave the consumer group) or within [1s, 10m], got 10ms`}},
		{name: "release_after within WAIT", env: []string{"FLATLINE_REDIS_WAIT_REPLICAS=1", "FLATLINE_REDIS_WAIT_TIMEOUT=5s"}, want: []string{`ingest.release_after: must be longer than redis.wait_timeout (5s) when redis.wait_replicas is set, got 5s`}},
		{name: "no roles", yaml: "roles: []\n", want: []string{`roles: name at least one of ingest, scanner`}},
		{name: "unknown role", env: []string{"FLATLINE_ROLES=ingest,dispatch"}, want: []string{`roles: unknown role "dispatch", want ingest or scanner (from environment variable FLATLINE_ROLES)`}},
		{name: "duplicate role", yaml: "roles: [scanner, scanner]\n", want: []string{`roles: "scanner" listed twice`}},
		{name: "shutdown timeout", yaml: "shutdown_timeout: 0s\n", want: []string{`shutdown_timeout: must be within (0, 1h], got 0s`}},
		{name: "instance id", set: map[string]string{"instance_id": "a b"}, want: []string{`instance_id: must not contain spaces or control characters, got "a b"`}},
		{name: "long instance id", set: map[string]string{"instance_id": strings.Repeat("x", 129)}, want: []string{`instance_id: must be at most 128 bytes, got 129`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := LoadOptions{Env: tt.env, Set: tt.set}
			if tt.yaml != "" {
				opts.File = testenv.File(t, "flatline.yaml", tt.yaml)
			}
			cfg, err := Load(opts)
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error containing %q", *cfg, tt.want)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(LoadOptions{File: "x.yaml"})
	if err == nil || err.Error() != `config file "x.yaml": no such file` {
		t.Errorf("missing file: %v", err)
	}
	dir := t.TempDir()
	_, err = Load(LoadOptions{File: dir})
	if err == nil || err.Error() != `config file "`+dir+`": is a directory` {
		t.Errorf("directory: %v", err)
	}
	if _, err := Load(LoadOptions{File: filepath.Join(dir, "nope.yaml")}); err == nil || !strings.HasSuffix(err.Error(), "no such file") {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestValidateFile(t *testing.T) {
	t.Parallel()
	if _, err := Load(LoadOptions{File: "flatline.yaml"}); err != nil {
		t.Errorf("Load(flatline.yaml) = %v", err)
	}
	if _, err := Load(LoadOptions{File: testenv.File(t, "flatline.yaml", "scanner:\n  interval: fast\n")}); err == nil || !strings.Contains(err.Error(), "scanner.interval") {
		t.Errorf("Load(bad) = %v", err)
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	const redisPass, kafkaPass = "s3cret-redis-pw", "s3cret-kafka-pw"
	cfg, err := Load(LoadOptions{
		File: testenv.File(t, "flatline.yaml", "redis:\n  password: "+redisPass+"\n  username: alice\nscanner:\n  interval: 1500ms\ntimeouts:\n  classes:\n    sensor: 30s\n"),
		Env:  []string{"FLATLINE_KAFKA_SASL_MECHANISM=SCRAM-SHA-512", "FLATLINE_KAFKA_SASL_USERNAME=bob", "FLATLINE_KAFKA_SASL_PASSWORD=" + kafkaPass},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, secret := range []string{redisPass, kafkaPass, "s3cret"} {
		if strings.Contains(text, secret) {
			t.Errorf("Redacted output contains secret %q:\n%s", secret, text)
		}
	}
	for _, want := range []string{"password: <redacted>", "username: alice", "username: bob", "interval: 1500ms", "sensor: 30s", "mechanism: SCRAM-SHA-512", "max: 168h\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("Redacted output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "<redacted>") != 2 {
		t.Errorf("want 2 redacted secrets:\n%s", text)
	}
	if cfg.Redis.Password != redisPass {
		t.Error("Redacted modified the config")
	}

	// Unset secrets stay empty rather than claiming a value exists.
	d := Default()
	out, err = d.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "<redacted>") {
		t.Errorf("empty secrets shown as redacted:\n%s", out)
	}
}

// TestRedactedRoundTrip: `config print` output is itself a valid config file
// that loads back to the same configuration, secrets aside.
func TestRedactedRoundTrip(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]LoadOptions{
		"defaults": {},
		"overrides": {Set: map[string]string{
			"timeouts.classes": "sensor=90s,gw=1h30m,odd: name=2s", "redis.addrs": "a:1,b:2", "http.addr": "",
			"kafka.dead_letter_topic": "", "instance_id": "007", "log.level": "debug", "kafka.group_id": "true",
			"scanner.interval": "1500us", "ingest.coalesce_window": "250ms", "redis.password": "pw",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			out, err := cfg.Redacted()
			if err != nil {
				t.Fatal(err)
			}
			back, err := load(LoadOptions{File: "printed.yaml"}, out)
			if err != nil {
				t.Fatalf("reloading Redacted output: %v\n%s", err, out)
			}
			want := *cfg
			if want.Redis.Password != "" {
				want.Redis.Password = redacted
			}
			if !reflect.DeepEqual(*back, want) {
				t.Errorf("round trip:\n%+v\nwant\n%+v\nprinted:\n%s", *back, want, out)
			}
		})
	}
}
