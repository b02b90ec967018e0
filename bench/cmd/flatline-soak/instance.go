package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flatline-dev/flatline/configs"
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
	cmd      *exec.Cmd
	started  time.Time
	ready    time.Time
	done     chan struct{} // closed once the process has exited
	waitErr  error         // its exit, set before done closes
}

// startInstance runs bin serve with settings (configuration key ->
// value) as FLATLINE_* variables, over the parent's environment without
// FLATLINE_* (a developer's own settings must not leak into the run). Its
// output goes to stderr, each line prefixed with its instance_id.
func startInstance(bin, slot string, gen int, httpAddr string, settings map[string]string) (*instance, error) {
	in := &instance{slot: slot, gen: gen, id: fmt.Sprintf("soak-%s%d", slot, gen), httpAddr: httpAddr, done: make(chan struct{})}
	all := maps.Clone(settings)
	all["http.addr"] = httpAddr
	all["instance_id"] = in.id
	cmd := exec.Command(bin, "serve")
	cmd.Env = childEnv(all)
	out := &prefixWriter{w: os.Stderr, prefix: fmt.Sprintf("  %s| ", in.id)}
	cmd.Stdout, cmd.Stderr = out, out
	// The kernel kills the child if this program dies, so no flatline
	// outlives a soak stopped with SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", in.id, err)
	}
	in.cmd, in.pid = cmd, cmd.Process.Pid
	go func() {
		in.waitErr = cmd.Wait()
		close(in.done)
	}()
	return in, nil
}

func childEnv(settings map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLATLINE_") {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		env = append(env, configs.EnvName(k)+"="+settings[k])
	}
	return env
}

// exited reports whether the process has exited.
func (in *instance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// waitReady polls /readyz, a new connection each time as kubelet does,
// until it answers 200.
func (in *instance) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(timeout)
	for {
		if in.exited() {
			return fmt.Errorf("%s exited while starting: %v", in.id, in.waitErr)
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
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(timeout):
		_ = in.cmd.Process.Kill()
		<-in.done
		return -1, fmt.Errorf("%s %w (%s)", in.id, errKilled, timeout)
	}
	code := in.cmd.ProcessState.ExitCode()
	if code != 0 {
		return code, fmt.Errorf("%s exited with %v", in.id, in.waitErr)
	}
	return 0, nil
}

// prefixWriter writes each complete line to w with prefix; exec copies the
// child's output into it from one goroutine, which Wait waits for.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		_, _ = fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
