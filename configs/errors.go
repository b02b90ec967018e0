package configs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Load's errors reach the terminal as "flatline: <err>", so each is one
// line that names the key and, where known, the source of its value.

// lineError escapes line breaks in an error from a stage's Validate, which
// may quote a user's value verbatim ("address a\nb: missing port").
type lineError struct{ err error }

var lineEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)

func (e lineError) Error() string { return lineEscaper.Replace(e.err.Error()) }
func (e lineError) Unwrap() error { return e.err }

func oneLine(err error) error {
	if strings.ContainsAny(err.Error(), "\n\r") {
		return lineError{err}
	}
	return err
}

// fileError keeps only the cause of a failed read: the operation and path
// that a *fs.PathError adds would repeat `config file "<name>"`.
func fileError(name string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("config file %q: no such file", name)
	case errors.As(err, &pe):
		return fmt.Errorf("config file %q: %w", name, pe.Err)
	}
	return fmt.Errorf("config file %q: %w", name, err)
}

// withOrigin adds where the offending key was set to a Validate error, which
// by convention starts with the key: an operator with both a file and a
// FLATLINE_ variable should not have to guess which one is wrong. A key
// inside a map (timeouts.classes.sensor) takes the origin of the map.
func withOrigin(err error, origins map[string]string) error {
	key, _, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.ContainsAny(key, " \t") {
		return err
	}
	for p := key; p != ""; {
		if o, ok := origins[p]; ok {
			return fmt.Errorf("%w (from %s)", err, o)
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return err
}
