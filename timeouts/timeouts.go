// Package timeouts holds the domain that ingest and dispatch share without
// importing each other: the timeout policy (ingest computes deadlines with
// it, dispatch reports timeout_ms and class) — the default, the bounds, the
// per-class timeouts and the class ids stored in scores — and the Recovery
// that ingest finds and dispatch publishes.
package timeouts

import (
	"fmt"
	"sort"
	"time"
)

// Config is the timeouts section of the configuration.
type Config struct {
	// Default is the timeout of a device with no valid timeout_ms and no
	// known class. Default: 60s.
	Default time.Duration `config:"default"`
	// Min and Max bound per-message timeout_ms and class timeouts.
	// Default: 1s and 168h.
	Min time.Duration `config:"min"`
	Max time.Duration `config:"max"`
	// Classes maps a device class to its timeout. Default: none.
	Classes map[string]time.Duration `config:"classes"`
	// StrictClasses makes a heartbeat with an unknown class invalid
	// (reason unknown_class) instead of falling back. Default: false.
	StrictClasses bool `config:"strict_classes"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Default: 60 * time.Second, Min: time.Second, Max: 168 * time.Hour}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if c.Min <= 0 {
		return fmt.Errorf("timeouts.min: must be positive, got %s", c.Min)
	}
	if c.Max < c.Min {
		return fmt.Errorf("timeouts.max: must be at least timeouts.min (%s), got %s", c.Min, c.Max)
	}
	if c.Default < c.Min || c.Default > c.Max {
		return fmt.Errorf("timeouts.default: must be within [%s, %s], got %s", c.Min, c.Max, c.Default)
	}
	for _, name := range c.ClassNames() {
		d := c.Classes[name]
		if name == "" {
			return fmt.Errorf("timeouts.classes: empty class name")
		}
		if d < c.Min || d > c.Max {
			return fmt.Errorf("timeouts.classes.%s: must be within [%s, %s], got %s", name, c.Min, c.Max, d)
		}
	}
	return nil
}

// ClassNames returns the configured class names, sorted.
func (c Config) ClassNames() []string {
	names := make([]string, 0, len(c.Classes))
	for n := range c.Classes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Policy resolves classes and timeouts. Class ids come from the Redis class
// registry (stable across restarts); build a Policy with NewPolicy after
// registering the configured classes.
type Policy struct {
	cfg    Config
	byName map[string]Class
	byID   map[int]Class
}

// Class is a configured device class.
type Class struct {
	ID      int
	Name    string
	Timeout time.Duration
}

// NewPolicy builds a policy from cfg and the registry's ids (name -> id).
// Names in ids that are not configured keep their id for event decoding
// (their timeout falls back to the default).
func NewPolicy(cfg Config, ids map[string]int) *Policy {
	p := &Policy{cfg: cfg, byName: make(map[string]Class), byID: make(map[int]Class)}
	for name, id := range ids {
		c := Class{ID: id, Name: name, Timeout: cfg.Default}
		if d, ok := cfg.Classes[name]; ok {
			c.Timeout = d
			p.byName[name] = c
		}
		p.byID[id] = c
	}
	return p
}

// Config returns the policy's configuration.
func (p *Policy) Config() Config { return p.cfg }

// ByName returns the configured class called name.
func (p *Policy) ByName(name string) (Class, bool) {
	c, ok := p.byName[name]
	return c, ok
}

// ByID returns the class with registry id id (0 = no class).
func (p *Policy) ByID(id int) (Class, bool) {
	c, ok := p.byID[id]
	return c, ok
}

// Default is the fallback timeout.
func (p *Policy) Default() time.Duration { return p.cfg.Default }
