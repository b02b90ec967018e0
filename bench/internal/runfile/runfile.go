// Package runfile is what the result files of flatline-bench and
// flatline-soak (bench/results/*.json) have in common: the header that
// says which run on which machine, and how a result is written.
package runfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/flatline-dev/flatline/internal/testenv/host"
)

// Header opens a result: embedded in a program's result type, its fields
// come first in the file.
type Header struct {
	Run     string       `json:"run"`
	Command string       `json:"command"`
	Machine host.Machine `json:"machine"`
}

// NewHeader is the header of this process's run, named run (its start
// time, in the program's layout).
func NewHeader(run string) Header {
	return Header{Run: run, Command: strings.Join(os.Args, " "), Machine: host.DescribeMachine()}
}

// Write saves v, indented, as dir/name (creating dir) and returns the path.
func Write(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}
