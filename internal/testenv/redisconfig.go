package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/internal/redisconn"
)

// RedisConfig is redisconn's default configuration on the one address addr,
// under a key prefix of the test's own: what a test of connecting (in
// internal/redisconn, or through app.Connect) edits into the case it needs.
func RedisConfig(t testing.TB, addr string) redisconn.Config {
	t.Helper()
	c := redisconn.DefaultConfig()
	c.Addrs = []string{addr}
	c.KeyPrefix = Prefix(t)
	return c
}

// SecretFile writes content to a file of its own, as Kubernetes mounts a
// Secret, and returns its path (for redis.password_file and the like).
func SecretFile(t testing.TB, content string) string {
	t.Helper()
	return File(t, "password", content)
}

// File writes content to a file named name in a directory of its own,
// readable by its owner only (as a secret or a configuration holding one
// would be), and returns its path; the directory is removed when the test
// ends.
func File(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// OneLineError fails t unless err is a single line that contains each of
// want (what went wrong and where) and, when secret is not "", does not
// contain secret: a refusal an operator reads on a terminal must neither
// scroll nor echo a password.
func OneLineError(t testing.TB, err error, secret string, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	if secret != "" && strings.Contains(msg, secret) {
		t.Errorf("error %q leaks the password", msg)
	}
}
