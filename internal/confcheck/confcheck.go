// Package confcheck holds the bound checks of the configuration sections'
// Validate methods, so that each is written once and every key's error
// reads alike: "scanner.batch_size: must be within [1, 10000], got 0".
package confcheck

import (
	"fmt"
	"strconv"
	"time"
)

// number is what a bound check takes: counts and durations.
type number interface{ ~int | ~int64 | ~float64 }

// Within is nil when lo <= v <= hi, else an error naming key with the
// bounds and v.
func Within[T number](key string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: must be within [%s, %s], got %v", key, bound(lo), bound(hi), v)
	}
	return nil
}

// NotNegative is nil when v >= 0, else an error naming key and v.
func NotNegative[T number](key string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s: must not be negative, got %v", key, v)
	}
	return nil
}

// First is the first of errs that is not nil: a section's checks in the
// order its keys are documented.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// bound writes a bound as the documentation does: a duration as
// FormatDuration does (1m, 24h), zero as 0.
func bound[T number](v T) string {
	d, ok := any(v).(time.Duration)
	switch {
	case !ok:
		return fmt.Sprint(v)
	case d == 0:
		return "0"
	}
	return FormatDuration(d)
}

// FormatDuration writes d in the largest unit that divides it ("90s",
// "168h", "1500ms"), which reads better than time.Duration.String's
// "168h0m0s" and parses back to the same value.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	units := []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
