package redisconn_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestPasswordFileValidate: a password file that cannot be used is refused
// at validation, and when the client is built, naming the key; so is a
// password set both ways. No error holds the password.
func TestPasswordFileValidate(t *testing.T) {
	t.Parallel()
	const pw = "never-Shown-pw"
	secretFile := testenv.SecretFile(t, pw+"\n")
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
		{"empty", func(c *redisconn.Config) { c.PasswordFile = testenv.SecretFile(t, "\n") },
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
			testenv.OneLineError(t, err, pw, tc.want...)
			if strings.HasPrefix(tc.name, "sentinel file without") {
				return // refused for the mode, before any file is read
			}
			_, err = redisconn.New(context.Background(), c)
			testenv.OneLineError(t, err, pw, tc.want...)
		})
	}
}
