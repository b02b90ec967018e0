package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/flatline-dev/flatline/bench/internal/prefix"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// instance is one `flatline serve` child process. A slot ("a", "b", and
// "c" for the third) keeps its HTTP port across restarts; each process in
// it is a generation.
type instance struct {
	slot     string
	gen      int
	id       string // instance_id
	httpAddr string
	pid      int
	proc     *testenv.Process
	started  time.Time
	ready    time.Time
}

// startInstance runs bin serve with settings (configuration key -> value)
// as FLATLINE_* variables (testenv.SettingsEnv). Its output goes to
// stderr, each line prefixed with its instance_id; the kernel kills it if
// this program dies, so no flatline outlives a soak stopped with SIGKILL.
func startInstance(bin, slot string, gen int, httpAddr string, settings map[string]string) (*instance, error) {
	in := &instance{slot: slot, gen: gen, id: fmt.Sprintf("soak-%s%d", slot, gen), httpAddr: httpAddr}
	all := maps.Clone(settings)
	all["http.addr"] = httpAddr
	all["instance_id"] = in.id
	cmd := exec.Command(bin, "serve")
	// GOGC=100 turns serve's heap floor off: the heap verdict reads the
	// collector's goal, which the floor holds at 64 MiB while less than
	// half of it is live, so a leak would show only past 32 MiB; at
	// GOGC=100 the goal is twice the live heap from the first byte.
	cmd.Env = append(testenv.SettingsEnv(all), "GOGC=100")
	out := prefix.NewWriter(os.Stderr, fmt.Sprintf("  %s| ", in.id))
	cmd.Stdout, cmd.Stderr = out, out
	in.started = time.Now()
	p, err := testenv.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", in.id, err)
	}
	in.proc, in.pid = p, p.Pid()
	return in, nil
}

// exited reports whether the process has exited.
func (in *instance) exited() bool { return in.proc.Exited() }

// waitReady polls /readyz, a new connection each time as kubelet does,
// until it answers 200.
func (in *instance) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	for {
		if in.exited() {
			return fmt.Errorf("%s exited while starting: %v", in.id, in.proc.Err())
		}
		if resp, err := client.Get("http://" + in.httpAddr + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				in.ready = time.Now()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s", in.id, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// errKilled is a stop that SIGTERM did not achieve within its timeout.
var errKilled = errors.New("did not exit after SIGTERM; killed")

// stop sends SIGTERM and waits for the exit, killing the process after
// timeout. It returns the exit code (-1 when killed or signalled) and an
// error unless the process exited 0 by itself.
func (in *instance) stop(timeout time.Duration) (int, error) {
	code, inTime := in.proc.Stop(timeout)
	if !inTime {
		return -1, fmt.Errorf("%s %w (%s)", in.id, errKilled, timeout)
	}
	if code != 0 {
		return code, fmt.Errorf("%s exited with %v", in.id, in.proc.Err())
	}
	return 0, nil
}
