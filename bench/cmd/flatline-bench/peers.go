package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/flatline-dev/flatline/bench/internal/prefix"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// PeersResult is what bench/peers (a separate Go module, so flatline does
// not depend on asynq) printed: one row per measured figure, and its
// details.
type PeersResult struct {
	Rows    []PeerRow       `json:"rows"`
	Details json.RawMessage `json:"details,omitempty"`
}

// PeerRow is one figure of a peer system.
type PeerRow struct {
	System string  `json:"system"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Note   string  `json:"note,omitempty"`
}

// runPeers runs the peers binary against a fresh redis-server of the same
// kind flatline's scenarios use, with -peers-args and then extra.
func runPeers(ctx context.Context, o *options, extra ...string) (*PeersResult, error) {
	rp, err := startRedis()
	if err != nil {
		return nil, err
	}
	defer rp.Close()
	args := append(append([]string{"-redis", rp.Addr}, strings.Fields(o.peersArgs)...), extra...)
	cmd := exec.CommandContext(ctx, o.peersBin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = prefix.NewWriter(os.Stderr, "  peers| ")
	cmd.SysProcAttr = testenv.ChildProcAttr() // killed if the bench dies
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.peersBin, err)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.peersBin, err)
	}
	var res PeersResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("%s printed no result: %w", o.peersBin, err)
	}
	return &res, nil
}

// MicroResult is one line of `go test -bench` output.
type MicroResult struct {
	Package    string             `json:"package"`
	Name       string             `json:"name"`
	Iterations int64              `json:"iterations"`
	Metrics    map[string]float64 `json:"metrics"`
}

// readMicro parses a `go test -bench -benchmem` output file.
func readMicro(path string) ([]MicroResult, string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var out []MicroResult
	pkg := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		iters, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r := MicroResult{Package: pkg, Name: f[0], Iterations: iters, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r.Metrics[f[i+1]] = v
			}
		}
		out = append(out, r)
	}
	return out, string(raw), nil
}

// value returns the figure of the row whose metric is metric, if any.
func (r *PeersResult) value(metric string) (float64, bool) {
	for _, row := range r.Rows {
		if row.Metric == metric {
			return row.Value, true
		}
	}
	return 0, false
}
