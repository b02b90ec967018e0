package maintenance

import (
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
)

// Config is the maintenance section of the configuration.
type Config struct {
	// MaxDuration is the longest window `maintenance start` accepts: a
	// forgotten window silences its devices for no longer than this.
	// Default: 168h.
	MaxDuration time.Duration `config:"max_duration"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{MaxDuration: 168 * time.Hour} }

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	return confcheck.Within("maintenance.max_duration", c.MaxDuration, time.Minute, 365*24*time.Hour)
}
