//go:build unix

package testenv_test

import (
	"errors"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// Stop returns the exit code of a process that exits on SIGTERM, and kills
// one that ignores it once the timeout has passed.
func TestProcessStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	start := func(script string) *testenv.Process {
		t.Helper()
		p, err := testenv.StartProcess(exec.Command("sh", "-c", script))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Kill)
		return p
	}
	exits := start(`trap 'exit 3' TERM; while :; do sleep 0.05; done`)
	ignores := start(`trap '' TERM; while :; do sleep 0.05; done`)
	time.Sleep(200 * time.Millisecond) // the traps are set
	if code, inTime := exits.Stop(5 * time.Second); code != 3 || !inTime {
		t.Errorf("Stop of a process exiting 3 on SIGTERM = %d, %v; want 3, true", code, inTime)
	}
	if code, inTime := ignores.Stop(300 * time.Millisecond); code != -1 || inTime || !ignores.Exited() {
		t.Errorf("Stop of a process ignoring SIGTERM = %d, %v (exited %v); want -1, false, exited", code, inTime, ignores.Exited())
	}
}

// A child's environment keeps none of the parent's FLATLINE_* or GODEBUG
// variables, and has the settings asked for under their variable names.
func TestChildEnvLeaksNoDeveloperSettings(t *testing.T) {
	t.Setenv("FLATLINE_REDIS_ADDRS", "developer:6379")
	t.Setenv("GODEBUG", "gctrace=1")
	t.Setenv("KEPT", "yes")
	env := testenv.SettingsEnv(map[string]string{"redis.addrs": "test:6379", "log.level": "warn"})
	for _, want := range []string{"KEPT=yes", "FLATLINE_REDIS_ADDRS=test:6379", "FLATLINE_LOG_LEVEL=warn"} {
		if !slices.Contains(env, want) {
			t.Errorf("%s missing from %v", want, env)
		}
	}
	for _, leaked := range []string{"FLATLINE_REDIS_ADDRS=developer:6379", "GODEBUG=gctrace=1"} {
		if slices.Contains(env, leaked) {
			t.Errorf("%s leaked into the child's environment", leaked)
		}
	}
}

// A program's redis-server (StartRedis) answers on its address with the
// arguments it was given, and Close ends the process.
func TestStartRedisServesUntilClose(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil && !testenv.InCI() {
		t.Skip("redis-server not on PATH")
	}
	srv, err := testenv.StartRedis("--requirepass", "program")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client(t).Ping(testenv.Context(t, 10*time.Second)).Err(); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	pid := srv.PID()
	srv.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("redis-server %d after Close: %v, want no such process", pid, err)
	}
}

// SettingsEnv names every setting's variable as configs does.
func TestSettingsEnvNamesVariablesAsConfigs(t *testing.T) {
	for _, key := range configs.Keys() {
		env := testenv.SettingsEnv(map[string]string{key: "v"})
		if want := configs.EnvName(key) + "=v"; !slices.Contains(env, want) {
			t.Errorf("%s: no %s in the child's environment", key, want)
		}
	}
}
