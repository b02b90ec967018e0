package avro_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/decode/avro"
	"github.com/flatline-dev/flatline/internal/testenv"
)

func TestValidateNamesTheKey(t *testing.T) {
	dir := t.TempDir()
	pwFile := testenv.SecretFile(t, "secret\n")
	valid := avro.DefaultConfig()
	valid.URL = "http://registry:8081"
	cases := []struct {
		name string
		edit func(*avro.Config)
		want string // "" for valid; else the start of the error
	}{
		{"defaults and a url", func(*avro.Config) {}, ""},
		{"several urls", func(c *avro.Config) { c.URL = "https://a:8081, https://b:8081" }, ""},
		{"basic auth", func(c *avro.Config) { c.Username, c.Password = "key", "secret" }, ""},
		{"password file", func(c *avro.Config) { c.Username, c.PasswordFile = "key", pwFile }, ""},
		{"tls", func(c *avro.Config) { c.URL, c.TLS.Enabled = "https://registry:8081", true }, ""},
		{"no url", func(c *avro.Config) { c.URL = "" }, "ingest.schema_registry.url: required"},
		{"no scheme", func(c *avro.Config) { c.URL = "registry:8081" }, `ingest.schema_registry.url: "registry:8081"`},
		{"no host", func(c *avro.Config) { c.URL = "http://" }, `ingest.schema_registry.url: "http://"`},
		{"other scheme", func(c *avro.Config) { c.URL = "ftp://registry" }, `ingest.schema_registry.url: "ftp://registry"`},
		{"one bad of two", func(c *avro.Config) { c.URL = "http://a:8081,b" }, `ingest.schema_registry.url: "b"`},
		{"tls over http", func(c *avro.Config) { c.TLS.Enabled = true }, "ingest.schema_registry.tls.enabled: set, but"},
		{"password alone", func(c *avro.Config) { c.Password = "secret" }, "ingest.schema_registry.username: required"},
		{"username alone", func(c *avro.Config) { c.Username = "key" }, "ingest.schema_registry.password: required"},
		{"both passwords", func(c *avro.Config) { c.Username, c.Password, c.PasswordFile = "key", "x", pwFile }, "ingest.schema_registry.password_file: set together"},
		{"missing password file", func(c *avro.Config) { c.Username, c.PasswordFile = "key", filepath.Join(dir, "nope") }, "ingest.schema_registry.password_file:"},
		{"no timeout", func(c *avro.Config) { c.Timeout = 0 }, "ingest.schema_registry.timeout: must be within"},
		{"huge timeout", func(c *avro.Config) { c.Timeout = time.Hour }, "ingest.schema_registry.timeout: must be within"},
		{"missing CA", func(c *avro.Config) {
			c.URL, c.TLS.Enabled, c.TLS.CAFile = "https://r:8081", true, filepath.Join(dir, "nope.pem")
		}, "ingest.schema_registry.tls.ca_file:"},
	}
	for _, c := range cases {
		cfg := valid
		c.edit(&cfg)
		err := cfg.Validate("ingest.schema_registry")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: Validate = %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: Validate = %v, want an error starting %q", c.name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: Validate = %v shows the password", c.name, err)
		}
	}
}

func TestDefaultTimeoutIsFiveSeconds(t *testing.T) {
	if got := avro.DefaultConfig().Timeout; got != 5*time.Second {
		t.Errorf("DefaultConfig().Timeout = %s, want 5s", got)
	}
}
