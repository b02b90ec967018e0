package kfetch

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// A Conn dials as flatline's kafka-go connections do, from the dialer
// kafkaconn builds: TLS verified against the configured CA, then SASL with
// each mechanism; a wrong password or an unknown CA is refused, without the
// password in the error.
func TestConnDialsWithTLSAndSASL(t *testing.T) {
	t.Parallel()
	const topic = "signals"
	users := []struct{ mechanism, user, password string }{
		{"PLAIN", "alice", "plain-Pass-1"},
		{"SCRAM-SHA-256", "bob", "scram256-Pass-2"},
		{"SCRAM-SHA-512", "carol", "scram512-Pass-3"},
	}
	certs := testenv.NewCerts(t)
	opts := []kfake.Opt{
		kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.EnableSASL(),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}),
	}
	for _, u := range users {
		opts = append(opts, kfake.Superuser(u.mechanism, u.user, u.password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	dial := func(mechanism, user, password, caFile string) (*Conn, error) {
		kc := kafkaconn.DefaultConfig()
		kc.Brokers = c.ListenAddrs()
		kc.SASL = kafkaconn.SASLConfig{Mechanism: mechanism, Username: user, Password: password}
		kc.TLS = tlsconf.Config{Enabled: true, CAFile: caFile}
		d, err := kc.Dialer()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return DialLeader(ctx, d, kc.Brokers, topic, 0, DefaultConfig())
	}
	for _, u := range users {
		conn, err := dial(u.mechanism, u.user, u.password, certs.CAFile)
		if err != nil {
			t.Errorf("%s: %v", u.mechanism, err)
			continue
		}
		res := new(Result)
		if err := conn.Fetch(context.Background(), topic, 0, 0, res); err != nil || res.HighWatermark != 0 {
			t.Errorf("%s: fetch %v, HWM %d; want an empty partition", u.mechanism, err, res.HighWatermark)
		}
		_ = conn.Close()

		_, err = dial(u.mechanism, u.user, "not-"+u.password, certs.CAFile)
		if err == nil {
			t.Errorf("%s with a wrong password authenticated", u.mechanism)
		} else if strings.Contains(err.Error(), "not-"+u.password) {
			t.Errorf("error leaks the password: %v", err)
		}
	}
	if _, err := dial("PLAIN", "alice", "plain-Pass-1", ""); err == nil {
		t.Error("a broker signed by an unknown CA was trusted")
	}
}
