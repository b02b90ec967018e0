package avro

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
	"github.com/flatline-dev/flatline/internal/secret"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// Config is the ingest.schema_registry section of the configuration: where
// the schemas of Avro values are fetched.
type Config struct {
	// URL is the registry's base URL, http:// or https://; several,
	// comma-separated, are tried in turn when one cannot be reached, as
	// Confluent's clients read schema.registry.url. Default: "" (required
	// with ingest.format avro).
	URL string `config:"url"`
	// Username and Password authenticate with HTTP basic auth (Confluent
	// Cloud: the API key and secret); empty for none.
	Username string `config:"username"`
	Password string `config:"password"`
	// PasswordFile names a file holding Password instead (a mounted
	// Kubernetes Secret), read when the client is built; set one of the
	// two. Default: "" (none).
	PasswordFile string `config:"password_file"`
	// TLS configures TLS to the registry (an https:// URL).
	TLS tlsconf.Config `config:"tls"`
	// Timeout bounds one request to the registry. Default: 5s.
	Timeout time.Duration `config:"timeout"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Timeout: 5 * time.Second}
}

// Validate checks the section; key is its path in the configuration
// (ingest.schema_registry), which every error names.
func (c Config) Validate(key string) error {
	urls, err := c.urls(key)
	if err != nil {
		return err
	}
	if c.TLS.Enabled {
		for _, u := range urls {
			if strings.HasPrefix(u, "http://") {
				return fmt.Errorf("%s.tls.enabled: set, but %s.url %q is http://; use https://", key, key, u)
			}
		}
	}
	if c.Username == "" && (c.Password != "" || c.PasswordFile != "") {
		return fmt.Errorf("%s.username: required with a password", key)
	}
	// The file is read here too, so that a missing or unreadable one fails
	// `config validate` and the start, naming the key, rather than the
	// first record.
	pw, err := c.password(key)
	if err != nil {
		return err
	}
	if c.Username != "" && pw == "" {
		return fmt.Errorf("%s.password: required with %s.username (or %s.password_file)", key, key, key)
	}
	if err := confcheck.Within(key+".timeout", c.Timeout, time.Millisecond, time.Minute); err != nil {
		return err
	}
	return c.TLS.Validate(key + ".tls")
}

// urls splits URL into the registry's base URLs, each checked.
func (c Config) urls(key string) ([]string, error) {
	if strings.TrimSpace(c.URL) == "" {
		return nil, fmt.Errorf("%s.url: required: the schema registry's base URL, e.g. http://schema-registry:8081", key)
	}
	var urls []string
	for _, raw := range strings.Split(c.URL, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s.url: %q: want http://host:port or https://host:port", key, raw)
		}
		urls = append(urls, raw)
	}
	return urls, nil
}

// password is the password, read from its file if set there.
func (c Config) password(key string) (string, error) {
	return secret.Password(key+".password", c.Password, c.PasswordFile)
}
