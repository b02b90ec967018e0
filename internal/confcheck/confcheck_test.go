package confcheck

import (
	"errors"
	"testing"
	"time"
)

// The messages of every section's keys are checked where they are read
// (configs' TestLoadErrors); here, the bounds and their forms.
func TestBounds(t *testing.T) {
	t.Parallel()
	if err := Within("k", 25*time.Hour, 0, 24*time.Hour); err == nil || err.Error() != "k: must be within [0, 24h], got 25h0m0s" {
		t.Errorf("above the bound: %v", err)
	}
	if err := Within("k", 1500*time.Millisecond, time.Millisecond, 90*time.Second); err != nil {
		t.Errorf("within the bounds: %v", err)
	}
	if err := Within("k", 1024, 1, 1024); err != nil {
		t.Errorf("the bounds are inclusive: %v", err)
	}
	if err := NotNegative("k", -1); err == nil || err.Error() != "k: must not be negative, got -1" {
		t.Errorf("negative: %v", err)
	}
	if err := NotNegative("k", time.Duration(0)); err != nil {
		t.Errorf("zero: %v", err)
	}
	a, b := errors.New("a"), errors.New("b")
	if First(nil, a, b) != a || First(nil, nil) != nil {
		t.Error("First does not return the first error")
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 1500 * time.Millisecond: "1500ms", 168 * time.Hour: "168h", 90 * time.Second: "90s",
		2 * time.Minute: "2m", time.Microsecond: "1us", 7: "7ns", -time.Second: "-1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(want); err != nil || back != d {
			t.Errorf("%q does not parse back to %v", want, d)
		}
	}
}
