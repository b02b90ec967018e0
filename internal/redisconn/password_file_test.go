package redisconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// writeSecret writes content to a file of its own, as Kubernetes mounts a
// Secret, and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPasswordFile: redis.password_file authenticates as redis.password
// does, its trailing line end dropped (a file written with echo); a file
// holding the wrong password is refused like a wrong password, without
// echoing it.
func TestPasswordFile(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-From-File"
	rs := testenv.Redis(t, "--requirepass", pw)
	ctx := context.Background()

	c := config(t, rs.Addr())
	c.PasswordFile = writeSecret(t, pw+"\n")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rdb, store, err := app.Connect(ctx, c)
	if err != nil {
		t.Fatalf("connect with redis.password_file: %v", err)
	}
	defer rdb.Close()
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	wrong := config(t, rs.Addr())
	wrong.PasswordFile = writeSecret(t, "not-"+pw)
	_, _, err = app.Connect(ctx, wrong)
	oneLine(t, err, "not-"+pw, rs.Addr(), "WRONGPASS")
}

// TestPasswordFileValidate: a password file that cannot be used is refused
// at validation, and when the client is built, naming the key; so is a
// password set both ways. No error holds the password.
func TestPasswordFileValidate(t *testing.T) {
	t.Parallel()
	const pw = "never-Shown-pw"
	secretFile := writeSecret(t, pw+"\n")
	missing := filepath.Join(t.TempDir(), "missing")
	sentinel := func(c *redisconn.Config) {
		c.Mode = redisconn.ModeSentinel
		c.Addrs = []string{"s1:26379"}
		c.Sentinel.Master = "mymaster"
	}
	for _, tc := range []struct {
		name string
		edit func(*redisconn.Config)
		want []string
	}{
		{"both", func(c *redisconn.Config) { c.Password, c.PasswordFile = pw, secretFile },
			[]string{"redis.password_file: set together with redis.password"}},
		{"missing", func(c *redisconn.Config) { c.PasswordFile = missing },
			[]string{"redis.password_file: ", missing, "no such file"}},
		{"empty", func(c *redisconn.Config) { c.PasswordFile = writeSecret(t, "\n") },
			[]string{"redis.password_file: ", "is empty"}},
		{"a directory", func(c *redisconn.Config) { c.PasswordFile = t.TempDir() },
			[]string{"redis.password_file: ", "is a directory"}},
		{"sentinel both", func(c *redisconn.Config) {
			sentinel(c)
			c.Sentinel.Password, c.Sentinel.PasswordFile = pw, secretFile
		}, []string{"redis.sentinel.password_file: set together with redis.sentinel.password"}},
		{"sentinel missing", func(c *redisconn.Config) { sentinel(c); c.Sentinel.PasswordFile = missing },
			[]string{"redis.sentinel.password_file: ", "no such file"}},
		{"sentinel file without sentinel mode", func(c *redisconn.Config) { c.Sentinel.PasswordFile = secretFile },
			[]string{"redis.sentinel: set, but redis.mode is auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redisconn.DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			oneLine(t, err, pw, tc.want...)
			if strings.HasPrefix(tc.name, "sentinel file without") {
				return // refused for the mode, before any file is read
			}
			_, err = redisconn.New(context.Background(), c)
			oneLine(t, err, pw, tc.want...)
		})
	}
}
