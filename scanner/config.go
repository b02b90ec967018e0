package scanner

import (
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
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
	return confcheck.First(
		confcheck.Within("scanner.interval", c.Interval, time.Millisecond, time.Minute),
		confcheck.Within("scanner.batch_size", c.BatchSize, 1, 10000),
		confcheck.Within("scanner.lease_ttl", c.LeaseTTL, 500*time.Millisecond, 10*time.Minute),
		confcheck.NotNegative("scanner.grace", c.Grace),
		confcheck.Within("scanner.max_inflight", c.MaxInflight, 1, 1024),
	)
}
