// Package configs holds flatline's documented configuration file
// (flatline.yaml, beside this file) and loads it, with FLATLINE_*
// environment variables and command-line overrides, into the Config structs
// that each stage package owns and validates.
//
// Precedence, lowest first: the stages' defaults, the YAML file, FLATLINE_*
// environment variables, then LoadOptions.Set (flags). Each source replaces
// whole values: a list or the timeouts.classes map given by the environment
// replaces the file's, it is not merged into it.
//
// The key set comes from the `config:"…"` tags of the structs, which only
// this package reads, so a field added to a stage's Config is loadable at
// once, and the tests fail until flatline.yaml documents it.
package configs

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/storm"
	"github.com/flatline-dev/flatline/timeouts"
)

// Roles of a `flatline serve` process.
const (
	// RoleIngest consumes heartbeats into the shards.
	RoleIngest = "ingest"
	// RoleScanner runs the shard scanners and dispatches their timeouts.
	RoleScanner = "scanner"
)

// Config is flatline's whole configuration: one section per stage, each
// owned and validated by its package, plus the process-wide keys.
type Config struct {
	Redis    redisconn.Config       `config:"redis"`
	Kafka    kafkaconn.Config       `config:"kafka"`
	Ingest   ingest.Config          `config:"ingest"`
	Timeouts timeouts.Config        `config:"timeouts"`
	Shards   rebalance.Config       `config:"shards"`
	Scanner  scanner.Config         `config:"scanner"`
	Dispatch dispatch.Config        `config:"dispatch"`
	Storm    storm.Config           `config:"storm"`
	Gateways scanner.GatewaysConfig `config:"gateways"`
	// Maintenance bounds maintenance windows (`flatline maintenance`).
	Maintenance maintenance.Config `config:"maintenance"`
	HTTP        httpapi.Config     `config:"http"`
	Log         logging.Config     `config:"log"`

	// Roles are the parts `flatline serve` runs: ingest, scanner (scanners
	// and their dispatch). Default: [ingest, scanner].
	Roles []string `config:"roles"`
	// ShutdownTimeout bounds a graceful shutdown. Default: 10s.
	ShutdownTimeout time.Duration `config:"shutdown_timeout"`
	// InstanceID names this process in leases and /status. Default: "",
	// which means hostname-pid-random, chosen at start.
	InstanceID string `config:"instance_id"`

	// Warnings are problems that did not stop loading, such as an unknown
	// FLATLINE_ environment variable; the caller should log them.
	Warnings []string `config:"-"`
}

// Default returns the documented defaults of every section.
func Default() Config {
	return Config{
		Redis:           redisconn.DefaultConfig(),
		Kafka:           kafkaconn.DefaultConfig(),
		Ingest:          ingest.DefaultConfig(),
		Timeouts:        timeouts.DefaultConfig(),
		Shards:          rebalance.DefaultConfig(),
		Scanner:         scanner.DefaultConfig(),
		Dispatch:        dispatch.DefaultConfig(),
		Storm:           storm.DefaultConfig(),
		Maintenance:     maintenance.DefaultConfig(),
		Gateways:        scanner.DefaultGatewaysConfig(),
		HTTP:            httpapi.DefaultConfig(),
		Log:             logging.DefaultConfig(),
		Roles:           []string{RoleIngest, RoleScanner},
		ShutdownTimeout: 10 * time.Second,
	}
}

// HasRole reports whether role is among c.Roles.
func (c *Config) HasRole(role string) bool { return slices.Contains(c.Roles, role) }

// Validate checks every section, then the rules that span sections. The
// error names the offending key.
func (c *Config) Validate() error {
	if err := c.Redis.Validate(); err != nil {
		return err
	}
	// Checked here first so the error names the key that collides.
	if c.Kafka.DeadLetterTopic != "" {
		for _, t := range []struct{ key, topic string }{
			{"kafka.signals_topic", c.Kafka.SignalsTopic},
			{"kafka.timeouts_topic", c.Kafka.TimeoutsTopic},
		} {
			if c.Kafka.DeadLetterTopic == t.topic {
				return fmt.Errorf("kafka.dead_letter_topic: must differ from %s (%q)", t.key, t.topic)
			}
		}
	}
	for _, v := range []interface{ Validate() error }{
		c.Kafka, c.Ingest, c.Timeouts, c.Shards, c.Scanner, c.Dispatch, c.Storm, c.Gateways, c.Maintenance, c.HTTP, c.Log,
	} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	// A device's clock may be off by up to max_skew before its ts is
	// replaced; a skew as long as the shortest timeout could fire a device
	// that is beating on time.
	if c.Ingest.MaxSkew >= c.Timeouts.Min {
		return fmt.Errorf("ingest.max_skew: must be below timeouts.min (%s), got %s", c.Timeouts.Min, c.Ingest.MaxSkew)
	}
	// A deadline within stall_after of an outage's start may still fire:
	// as long as the shortest timeout, it could be a device beating on
	// time.
	if c.Storm.StallAfter >= c.Timeouts.Min {
		return fmt.Errorf("storm.stall_after: must be below timeouts.min (%s), got %s", c.Timeouts.Min, c.Storm.StallAfter)
	}
	// A write waiting for its replicas is an answer only once WAIT
	// returned: a write that may wait that long must not count as one
	// Redis never answered.
	if c.Redis.WaitReplicas > 0 && c.Ingest.ReleaseAfter != 0 && c.Ingest.ReleaseAfter <= c.Redis.WaitTimeout {
		return fmt.Errorf("ingest.release_after: must be longer than redis.wait_timeout (%s) when redis.wait_replicas is set, got %s", c.Redis.WaitTimeout, c.Ingest.ReleaseAfter)
	}
	if err := c.validateRoles(); err != nil {
		return err
	}
	if c.ShutdownTimeout <= 0 || c.ShutdownTimeout > time.Hour {
		return fmt.Errorf("shutdown_timeout: must be within (0, 1h], got %s", c.ShutdownTimeout)
	}
	// The id is a lease owner value and a /status field: keep it printable.
	if len(c.InstanceID) > 128 {
		return fmt.Errorf("instance_id: must be at most 128 bytes, got %d", len(c.InstanceID))
	}
	if i := strings.IndexFunc(c.InstanceID, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }); i >= 0 {
		return fmt.Errorf("instance_id: must not contain spaces or control characters, got %q", c.InstanceID)
	}
	return nil
}

func (c *Config) validateRoles() error {
	if len(c.Roles) == 0 {
		return fmt.Errorf("roles: name at least one of %s, %s", RoleIngest, RoleScanner)
	}
	for i, r := range c.Roles {
		if r != RoleIngest && r != RoleScanner {
			return fmt.Errorf("roles: unknown role %q, want %s or %s", r, RoleIngest, RoleScanner)
		}
		if slices.Contains(c.Roles[:i], r) {
			return fmt.Errorf("roles: %q listed twice", r)
		}
	}
	return nil
}
