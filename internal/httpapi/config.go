package httpapi

import (
	"fmt"
	"net"
)

// Config is the http section of the configuration.
type Config struct {
	// Addr is where /metrics, /healthz, /readyz and /status listen; empty
	// disables the server. Default: 127.0.0.1:9464 (loopback only).
	Addr string `config:"addr"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{Addr: "127.0.0.1:9464"} }

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("http.addr: %v", err)
	}
	return nil
}
