package main

import (
	"bytes"
	"strings"
	"testing"
)

// result is what one in-process run of the command line left behind.
type result struct {
	code           int
	stdout, stderr string
}

// run executes args as `flatline args...` in process, with env as the whole
// environment (nil: none, so the test's own FLATLINE_* variables do not leak
// in).
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(args, env, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestGlobalFlagsWorkInAnyPosition(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help", "--config", "f.yaml"},
		{"-h", "--config", "f.yaml"},
		{"--config", "f.yaml", "--help"},
		{"--help", "--log-level", "debug"},
		{"shards", "--help", "--config", "f.yaml"},
		{"shards", "status", "-h", "--config", "f.yaml"},
		{"--help", "--config", "f.yaml", "device", "get"},
		{"completion", "--help", "--config", "f.yaml"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "Usage:") {
				t.Fatalf("no help printed:\n%s", r.stdout)
			}
		})
	}
}

func TestGlobalFlagAfterTheCommandIsRead(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "config", "print", "--config", "/nonexistent/flatline.yaml")
	if r.code == 0 || !strings.Contains(r.stderr, "/nonexistent/flatline.yaml") {
		t.Fatalf("exit %d, stderr %q: want the missing file named", r.code, r.stderr)
	}
}

func TestAnUnknownCommandIsOneLine(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "--config", "f.yaml", "nosuch")
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `unknown command "nosuch"`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestConfigValidateFailsNamingAnUnknownVariable(t *testing.T) {
	t.Parallel()
	env := []string{"FLATLINE_SCANER_GRACE=50ms", "FLATLINE_SERVICE_HOST=10.96.0.12"}
	r := run(t, env, "config", "validate")
	want := "flatline: environment variable FLATLINE_SCANER_GRACE is not a flatline setting (did you mean FLATLINE_SCANNER_GRACE?)\n"
	if r.code == 0 || r.stderr != want || r.stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	// Other commands only warn (serve logs it): config print still prints.
	if r := run(t, env, "config", "print"); r.code != 0 {
		t.Fatalf("config print: exit %d, stderr %q", r.code, r.stderr)
	}
	// A Kubernetes service link alone is not a mistake.
	if r := run(t, env[1:], "config", "validate"); r.code != 0 || r.stdout != "defaults and environment: ok\n" {
		t.Fatalf("service link: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"nosuch"},
		{"shards", "status", "--bogus"},
		{"version", "extra"},
		{"shards", "scale", "--to", "abc"},
	} {
		if r := run(t, nil, args...); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, r.code, r.stderr)
		}
	}
	// A command line that runs, and fails at its work, exits 1.
	if r := run(t, []string{"FLATLINE_REDIS_ADDRS=127.0.0.1:1"}, "shards", "status"); r.code != 1 {
		t.Errorf("shards status against no Redis: exit %d, want 1", r.code)
	}
}
