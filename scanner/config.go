package scanner

import (
	"fmt"
	"time"
)

// Config is the scanner section of the configuration.
type Config struct {
	// Interval is how often a poll looks at the next deadline of every
	// shard, a safety net: scanners wake for their shard's next deadline,
	// and a write that brings it closer than a poll away wakes them
	// itself, on whichever instance scans the shard. Default: 1s.
	Interval time.Duration `config:"interval"`
	// BatchSize is how many due members one scan takes. Default: 20.
	BatchSize int `config:"batch_size"`
	// LeaseTTL is how long a shard's scanner lease lives without renewal:
	// the longest a dead instance's shards stay unscanned. Default: 5s.
	LeaseTTL time.Duration `config:"lease_ttl"`
	// Grace holds firing back this much behind the watermark. Default: 0.
	Grace time.Duration `config:"grace"`
	// MaxInflight is how many batches of one shard may wait for Kafka's
	// acknowledgement at once. Default: 16.
	MaxInflight int `config:"max_inflight"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Interval: time.Second, BatchSize: 20, LeaseTTL: 5 * time.Second, MaxInflight: 16}
}

// WakeWithin is how soon a written deadline must fall due for the write to
// wake its shard's scanner (shard.Wakes.Within): the poll sees anything
// later in time. pollSlack covers a poll that runs late.
func (c Config) WakeWithin() time.Duration { return c.Interval + pollSlack }

// pollSlack is how late a poll may run (the scheduler, a slow read of many
// shards) without a deadline it should have seen falling due before it.
const pollSlack = 100 * time.Millisecond

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if c.Interval < time.Millisecond || c.Interval > time.Minute {
		return fmt.Errorf("scanner.interval: must be within [1ms, 1m], got %s", c.Interval)
	}
	if c.BatchSize < 1 || c.BatchSize > 10000 {
		return fmt.Errorf("scanner.batch_size: must be within [1, 10000], got %d", c.BatchSize)
	}
	if c.LeaseTTL < 500*time.Millisecond || c.LeaseTTL > 10*time.Minute {
		return fmt.Errorf("scanner.lease_ttl: must be within [500ms, 10m], got %s", c.LeaseTTL)
	}
	if c.Grace < 0 {
		return fmt.Errorf("scanner.grace: must not be negative, got %s", c.Grace)
	}
	if c.MaxInflight < 1 || c.MaxInflight > 1024 {
		return fmt.Errorf("scanner.max_inflight: must be within [1, 1024], got %d", c.MaxInflight)
	}
	return nil
}
