package httpapi

import (
	"fmt"
	"net"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
)

// The values of http.expose.
const (
	// ExposeAll serves every endpoint.
	ExposeAll = "all"
	// ExposeMetrics serves /metrics, /healthz and /readyz only: nothing
	// that names a device (the status page, /status, /devices/down).
	ExposeMetrics = "metrics"
)

// Config is the http section of the configuration.
type Config struct {
	// Addr is where /metrics, /healthz, /readyz and /status listen; empty
	// disables the server. Default: 127.0.0.1:9464 (loopback only).
	Addr string `config:"addr"`
	// WebConfigFile is a file in the Prometheus exporter-toolkit web-config
	// format (TLS certificate and key, client CA, basic-auth users with
	// bcrypt hashes), applied to every endpoint; re-read on each request
	// and connection, as the toolkit does, so certificates and users can
	// change without a restart. Default: "" (plain HTTP, no
	// authentication).
	WebConfigFile string `config:"web_config_file"`
	// Expose is which endpoints are served: ExposeAll or ExposeMetrics.
	// Default: all.
	Expose string `config:"expose"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{Addr: "127.0.0.1:9464", Expose: ExposeAll} }

// Validate checks the section; errors name the offending key. The web
// config file is read and checked as the server would use it (its YAML,
// bcrypt hashes, certificate and key), so a bad one fails the start.
func (c Config) Validate() error {
	if c.Expose != ExposeAll && c.Expose != ExposeMetrics {
		return fmt.Errorf("http.expose: want %s or %s, got %q", ExposeAll, ExposeMetrics, c.Expose)
	}
	if err := web.Validate(c.WebConfigFile); err != nil {
		return fmt.Errorf("http.web_config_file: %s: %v", c.WebConfigFile, oneLine(err))
	}
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("http.addr: %v", err)
	}
	return nil
}

// oneLine joins the lines of err (YAML errors list one problem a line,
// indented), so that a configuration error stays one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
