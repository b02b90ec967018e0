package rebalance

import (
	"fmt"
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
	"github.com/flatline-dev/flatline/shard"
)

// Config is the shards section of the configuration.
type Config struct {
	// InitialCount is the shard count of a fresh deployment (a power of two,
	// 1..4096); once a layout is stored, `flatline shards scale` changes it.
	// Default: 16.
	InitialCount int `config:"initial_count"`
	// PollInterval is how often every instance re-reads the layout.
	// Default: 250ms.
	PollInterval time.Duration `config:"poll_interval"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{InitialCount: 16, PollInterval: 250 * time.Millisecond}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if !shard.ValidCount(c.InitialCount) {
		return fmt.Errorf("shards.initial_count: must be a power of two within [1, %d], got %d", shard.MaxShards, c.InitialCount)
	}
	return confcheck.Within("shards.poll_interval", c.PollInterval, 10*time.Millisecond, time.Second)
}
