package storm

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/flatline-dev/flatline/internal/confcheck"
)

// Config is the storm section of the configuration.
type Config struct {
	// StallAfter is how long a busy signals partition's high-water mark may
	// stay still before the partition counts as stalled; a partition whose
	// records are usually further apart waits five of its usual gaps
	// instead. Must be below timeouts.min: a deadline within StallAfter of
	// an outage's start may still fire. Default: 500ms.
	StallAfter time.Duration `config:"stall_after"`
	// MinDevices is how many distinct devices a partition's recent traffic
	// must come from for it to stall (a few devices dying is not an
	// outage), and how many timeouts a window must hold, besides
	// Threshold, to declare a storm. Default: 100.
	MinDevices int `config:"min_devices"`
	// MaxHold bounds a hold, from the stall's detection: then the
	// partition's watermark follows probes again and the held deadlines
	// fire, each with a storm_id. 0 turns holding off. Default: 5m.
	MaxHold time.Duration `config:"max_hold"`
	// Threshold is the fraction of tracked devices that must time out
	// within Window to declare a storm. Default: 0.01.
	Threshold float64 `config:"threshold"`
	// Window is the span over which timeouts are counted for storms, and
	// the span of recent traffic a partition's distinct devices are
	// counted over. Default: 10s.
	Window time.Duration `config:"window"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{StallAfter: 500 * time.Millisecond, MinDevices: 100, MaxHold: 5 * time.Minute, Threshold: 0.01, Window: 10 * time.Second}
}

// Validate checks the section; errors name the offending key. That
// stall_after stays below timeouts.min is checked where both are known
// (configs).
func (c Config) Validate() error {
	return confcheck.First(
		confcheck.Within("storm.stall_after", c.StallAfter, 10*time.Millisecond, time.Hour),
		confcheck.Within("storm.min_devices", c.MinDevices, 1, 1_000_000),
		confcheck.Within("storm.max_hold", c.MaxHold, 0, 24*time.Hour),
		fraction("storm.threshold", c.Threshold),
		confcheck.Within("storm.window", c.Window, time.Second, time.Hour),
	)
}

// fraction is nil when 0 < v <= 1, else an error naming key and v.
func fraction(key string, v float64) error {
	if !(v > 0 && v <= 1) {
		return fmt.Errorf("%s: must be a fraction within (0, 1], got %v", key, v)
	}
	return nil
}

// Holding reports whether stalled partitions hold firing at all.
func (c Config) Holding() bool { return c.MaxHold > 0 }

// NewID returns a fresh storm (or hold) id: the UTC second it was taken and
// a random suffix, e.g. "20261127T031500Z-3fa9c2", readable in an event
// and unique across instances.
func NewID(now time.Time) string {
	return now.UTC().Format("20060102T150405Z") + "-" + strconv.FormatUint(rand.Uint64()&0xffffff|0x1000000, 16)[1:]
}
