// Package redisconn builds the go-redis client from the redis section of the
// configuration: one address is a standalone server, several a cluster.
package redisconn

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// quiet drops go-redis's own log lines (one per failed dial): flatline's
// stages log outages once when they begin and end instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var silence sync.Once

// Config is the redis section of the configuration.
type Config struct {
	// Addrs are host:port addresses; one = standalone, several = cluster.
	// Default: [127.0.0.1:6379].
	Addrs []string `config:"addrs"`
	// Username and Password authenticate (ACL user or requirepass).
	Username string `config:"username"`
	Password string `config:"password"`
	// DB selects the database (standalone only). Default: 0.
	DB int `config:"db"`
	// KeyPrefix starts every key flatline writes. Default: flatline.
	KeyPrefix string `config:"key_prefix"`
	// WaitReplicas, when above 0, makes an ingest batch count as written
	// only once WAIT confirms that this many replicas of every master it
	// touched have it: only then are its offsets committed and watermarks
	// raised, so a failover to a replica loses no acknowledged reset.
	// Default: 0 (no wait).
	WaitReplicas int `config:"wait_replicas"`
	// WaitTimeout is how long one WAIT waits for the replicas; a batch
	// they did not confirm by then is written again. Default: 1s.
	WaitTimeout time.Duration `config:"wait_timeout"`
	// TLS configures a TLS connection.
	TLS tlsconf.Config `config:"tls"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: "flatline", WaitTimeout: time.Second}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if len(c.Addrs) == 0 {
		return fmt.Errorf("redis.addrs: at least one address is required")
	}
	for _, a := range c.Addrs {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("redis.addrs: %q is not host:port", a)
		}
	}
	if c.DB < 0 {
		return fmt.Errorf("redis.db: must not be negative, got %d", c.DB)
	}
	if len(c.Addrs) > 1 && c.DB != 0 {
		return fmt.Errorf("redis.db: a Redis Cluster has only db 0, got %d", c.DB)
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} \t\n") {
		return fmt.Errorf("redis.key_prefix: must be non-empty without braces or spaces, got %q", c.KeyPrefix)
	}
	if c.WaitReplicas < 0 {
		return fmt.Errorf("redis.wait_replicas: must not be negative, got %d", c.WaitReplicas)
	}
	if c.WaitTimeout <= 0 {
		return fmt.Errorf("redis.wait_timeout: must be positive, got %s", c.WaitTimeout)
	}
	return c.TLS.Validate("redis.tls")
}

// readTimeout is the client's socket read timeout: go-redis's default (0
// means 5s) unless ingest waits for replicas. A pipeline's replies are read
// under one deadline, and ingest sends WAIT in the pipeline of the writes
// it waits for (see shard.Durability), so then the deadline grows by
// wait_timeout.
func (c Config) readTimeout() time.Duration {
	if c.WaitReplicas == 0 {
		return 0
	}
	return 5*time.Second + c.WaitTimeout
}

// New builds the client: a ClusterClient for several addresses, a Client for one.
func New(c Config) (redis.UniversalClient, error) {
	silence.Do(func() { redis.SetLogger(quiet{}) })
	tc, err := c.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("redis.tls: %w", err)
	}
	if len(c.Addrs) > 1 {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: tc,
			ReadTimeout: c.readTimeout(),
		}), nil
	}
	return redis.NewClient(&redis.Options{
		Addr: c.Addrs[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tc,
		ReadTimeout: c.readTimeout(),
	}), nil
}
