package maintenance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flatline-dev/flatline/shard"
)

// The limits of windows, each refused with one line naming it.
const (
	// MaxDevices is the most device ids one window lists.
	MaxDevices = 1000
	// MaxOpen is the most windows open at once.
	MaxOpen = 10000
	// keepEnded is how long an ended window is kept: for `list --all`,
	// and so that a device released at its end still carries its id when
	// it fires, up to timeouts.max (default 168h) later.
	keepEnded = 8 * 24 * time.Hour
	// maxIDBytes bounds a device id, class or prefix, as §2 bounds ids.
	maxIDBytes = 256
)

// Request is what `maintenance start` asks for: exactly one of Devices,
// Class and Prefix, and exactly one of For and Until.
type Request struct {
	Devices []string
	Class   string
	Prefix  string
	For     time.Duration
	Until   time.Time
	Reason  string
}

// Window checks r against cfg and the limits, and returns the window it
// opens at now. Its errors are one line naming the limit and its value.
func (r Request) Window(cfg Config, now time.Time) (shard.Window, error) {
	match, err := r.match()
	if err != nil {
		return shard.Window{}, err
	}
	until := r.Until
	switch {
	case r.For != 0 && !r.Until.IsZero():
		return shard.Window{}, errors.New("give --for or --until, not both")
	case r.For != 0:
		until = now.Add(r.For)
	case r.Until.IsZero():
		return shard.Window{}, errors.New("give how long the window lasts: --for DURATION or --until RFC3339")
	}
	d := until.Sub(now)
	if d <= 0 {
		return shard.Window{}, fmt.Errorf("the window must end after now, got until %s", until.UTC().Format(time.RFC3339))
	}
	if d > cfg.MaxDuration {
		return shard.Window{}, fmt.Errorf("a window lasts at most maintenance.max_duration (%s), got %s", cfg.MaxDuration, d.Round(time.Second))
	}
	return shard.Window{ID: NewID(now), Match: match, FromMs: now.UnixMilli(), UntilMs: until.UnixMilli(), Reason: r.Reason}, nil
}

// match checks what the window matches.
func (r Request) match() (shard.WindowMatch, error) {
	given := 0
	for _, set := range []bool{len(r.Devices) > 0, r.Class != "", r.Prefix != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return shard.WindowMatch{}, errors.New("give exactly one of --device, --class and --prefix")
	}
	if len(r.Devices) > MaxDevices {
		return shard.WindowMatch{}, fmt.Errorf("--device takes at most 1,000 ids, got %d", len(r.Devices))
	}
	seen := make(map[string]bool, len(r.Devices))
	var ids []string
	for _, id := range r.Devices {
		if err := checkName("--device", id); err != nil {
			return shard.WindowMatch{}, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, c := range []struct{ flag, v string }{{"--class", r.Class}, {"--prefix", r.Prefix}} {
		if c.v != "" {
			if err := checkName(c.flag, c.v); err != nil {
				return shard.WindowMatch{}, err
			}
		}
	}
	return shard.WindowMatch{Devices: ids, Class: r.Class, Prefix: r.Prefix}, nil
}

func checkName(flag, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s: an empty value", flag)
	case len(v) > maxIDBytes:
		return fmt.Errorf("%s: at most %d bytes, got %d", flag, maxIDBytes, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("%s: not UTF-8: %q", flag, v)
	}
	return nil
}

// NewID returns a fresh window id: "m-", the UTC second it was taken and a
// random suffix, readable in an event and unique across instances.
func NewID(now time.Time) string {
	return "m-" + now.UTC().Format("20060102T150405Z") + "-" + strconv.FormatUint(rand.Uint64()&0xffffff|0x1000000, 16)[1:]
}

// Start opens the window r asks for at now.
func Start(ctx context.Context, st *shard.Store, cfg Config, r Request, now time.Time) (shard.Window, error) {
	w, err := r.Window(cfg, now)
	if err != nil {
		return shard.Window{}, err
	}
	_, err = st.StartWindow(ctx, w, MaxOpen, now.UnixMilli(), now.Add(-keepEnded).UnixMilli())
	if errors.Is(err, shard.ErrTooManyWindows) {
		return shard.Window{}, errors.New("at most 10,000 maintenance windows are open at once: end one first")
	}
	return w, err
}
