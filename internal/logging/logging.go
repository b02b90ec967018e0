// Package logging builds the process's slog.Logger from the log section of
// the configuration.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Config is the log section of the configuration.
type Config struct {
	// Level is debug, info, warn or error. Default: info.
	Level string `config:"level"`
	// Format is text or json. Default: text.
	Format string `config:"format"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{Level: "info", Format: "text"} }

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if _, err := parseLevel(c.Level); err != nil {
		return err
	}
	switch c.Format {
	case "text", "json":
		return nil
	}
	return fmt.Errorf("log.format: want text or json, got %q", c.Format)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("log.level: want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// New returns a logger writing to w.
func New(c Config, w io.Writer) *slog.Logger {
	lvl, err := parseLevel(c.Level)
	if err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Limiter lets one log line through per interval and counts the ones it
// held back, so a flood (invalid messages, a failing broker) costs one line
// per interval that says how many were skipped. Safe for concurrent use.
type Limiter struct {
	Every time.Duration

	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// Allow reports whether a line may be logged now and, if so, how many were
// held back since the last one.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	l.next = now.Add(l.Every)
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}
