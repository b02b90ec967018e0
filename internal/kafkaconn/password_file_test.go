package kafkaconn_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/testenv"
)

// TestSASLPasswordFile: kafka.sasl.password_file authenticates as
// kafka.sasl.password does, its trailing line end dropped; a file that
// cannot be used, or a password set both ways, is refused naming the key,
// at validation and when a dialer or transport is built, without the
// password in the error.
func TestSASLPasswordFile(t *testing.T) {
	t.Parallel()
	brokers := saslCluster(t)
	u := users[1]
	dir := t.TempDir()
	file := testenv.SecretFile(t, u.password+"\n")
	c := kafkaConfig(brokers, u.mechanism, u.user, "")
	c.SASL.PasswordFile = file
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := roundTrip(ctx, c, "password from a file"); err != nil {
		t.Fatalf("%s as %s with kafka.sasl.password_file: %v", u.mechanism, u.user, err)
	}

	empty := testenv.SecretFile(t, "\n")
	for _, tc := range []struct {
		name     string
		password string
		file     string
		want     string
	}{
		{"both", u.password, file, "kafka.sasl.password_file: set together with kafka.sasl.password"},
		{"missing", "", filepath.Join(dir, "missing"), "no such file"},
		{"empty", "", empty, "is empty"},
	} {
		bad := kafkaConfig(brokers, u.mechanism, u.user, tc.password)
		bad.SASL.PasswordFile = tc.file
		errs := map[string]error{"Validate": bad.Validate()}
		_, errs["Dialer"] = bad.Dialer()
		_, errs["Transport"] = bad.Transport()
		for what, err := range errs {
			if err == nil || !strings.HasPrefix(err.Error(), "kafka.sasl.password_file: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s = %v, want kafka.sasl.password_file: ...%s", tc.name, what, err, tc.want)
				continue
			}
			if strings.Contains(err.Error(), u.password) {
				t.Errorf("%s: %s error leaks the password: %v", tc.name, what, err)
			}
		}
	}
}
