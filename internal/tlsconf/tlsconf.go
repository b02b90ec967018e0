// Package tlsconf turns a tls section of the configuration (redis.tls,
// kafka.tls) into a *tls.Config, for the Redis and the Kafka connections
// alike.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Config is a tls section of the configuration (redis.tls, kafka.tls).
type Config struct {
	Enabled bool `config:"enabled"`
	// CAFile verifies the server; empty uses the system roots.
	CAFile string `config:"ca_file"`
	// CertFile and KeyFile present a client certificate.
	CertFile string `config:"cert_file"`
	KeyFile  string `config:"key_file"`
	// InsecureSkipVerify disables server verification (tests only).
	InsecureSkipVerify bool `config:"insecure_skip_verify"`
	// ServerName overrides the name verified in the server certificate.
	ServerName string `config:"server_name"`
}

// Validate checks the TLS files exist; key is the config path for errors.
func (t Config) Validate(key string) error {
	if !t.Enabled {
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("%s: cert_file and key_file go together", key)
	}
	for _, f := range []struct{ name, path string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s.%s: %q: %v", key, f.name, f.path, errors.Unwrap(err))
		}
	}
	return nil
}

// Build returns the tls.Config, or nil when TLS is disabled.
func (t Config) Build() (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	tc := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName, MinVersion: tls.VersionTLS12} //nolint:gosec // opt-in for tests
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
