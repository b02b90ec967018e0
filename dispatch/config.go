package dispatch

import (
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
)

// Config is the dispatch section of the configuration.
type Config struct {
	// RecoveryWindow is how long after its timeout a device that beats again
	// produces a recovered event; 0 disables recovered events. Default: 24h.
	RecoveryWindow time.Duration `config:"recovery_window"`
	// Linger is how long the producer waits, once an event is queued, to
	// gather more into one produce request. Default: 0 — events go out at
	// once, and those queued while a request is out share the next one.
	Linger time.Duration `config:"linger"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{RecoveryWindow: 24 * time.Hour}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	return confcheck.First(
		confcheck.NotNegative("dispatch.recovery_window", c.RecoveryWindow),
		confcheck.Within("dispatch.linger", c.Linger, 0, time.Second),
	)
}
