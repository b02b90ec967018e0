package testenv

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Process is a child process — a redis-server, a flatline under test or
// under load — whose exit is awaited in the background, so its owner can
// ask whether it is still running without blocking.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
	err  error         // Wait's result, set before done closes
}

// StartProcess starts cmd, with ChildProcAttr unless the caller set its
// own SysProcAttr, and waits for its exit in the background. Its owner
// ends it (Kill or Stop); the kernel kills it if this process dies first.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = ChildProcAttr()
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil for exit status 0); valid once it has
// exited.
func (p *Process) Err() error { return p.err }

// State is the exited process's state (its exit status, or the signal that
// ended it); valid once it has exited.
func (p *Process) State() *os.ProcessState { return p.cmd.ProcessState }

// Kill ends the process with SIGKILL, as a crash does, and waits until it
// is gone. Killing an exited process does nothing.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to shut down (SIGTERM) and waits up to timeout for
// it to exit, then kills it. It returns the exit code (-1 when a signal
// ended the process) and whether it exited within timeout.
func (p *Process) Stop(timeout time.Duration) (code int, inTime bool) {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(timeout):
			p.Kill()
			return -1, false
		}
	}
	return p.cmd.ProcessState.ExitCode(), true
}

// ChildEnv is this process's environment without its FLATLINE_* and
// GODEBUG variables, plus vars (name -> value): a flatline child is
// configured by what its test or benchmark sets, never by a developer's
// own settings, and its runtime settings are the caller's to choose.
func ChildEnv(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLATLINE_") || strings.HasPrefix(kv, "GODEBUG=") {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// SettingsEnv is ChildEnv with flatline settings given by configuration key
// (redis.addrs -> FLATLINE_REDIS_ADDRS), as the benchmarks configure their
// children. The names follow configs' rule (FLATLINE_, the key upper-cased,
// "." -> "_"), written out here: configs imports the packages whose tests
// import testenv.
func SettingsEnv(settings map[string]string) []string {
	vars := make(map[string]string, len(settings))
	for k, v := range settings {
		vars["FLATLINE_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = v
	}
	return ChildEnv(vars)
}
