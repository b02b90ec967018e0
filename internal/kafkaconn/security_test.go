package kafkaconn_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// Credentials of the SASL cluster, one user per mechanism.
var users = []struct{ mechanism, user, password string }{
	{"PLAIN", "alice", "plain-Pass-1"},
	{"SCRAM-SHA-256", "bob", "scram256-Pass-2"},
	{"SCRAM-SHA-512", "carol", "scram512-Pass-3"},
}

const topic = "device-signals"

// saslCluster starts a kfake broker that requires SASL, knowing users, with
// extra options (TLS).
func saslCluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.EnableSASL()}, opts...)
	for _, u := range users {
		opts = append(opts, kfake.Superuser(u.mechanism, u.user, u.password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func kafkaConfig(brokers []string, mechanism, user, password string) kafkaconn.Config {
	c := kafkaconn.DefaultConfig()
	c.Brokers = brokers
	c.SASL = kafkaconn.SASLConfig{Mechanism: mechanism, Username: user, Password: password}
	return c
}

// roundTrip uses c as every part of flatline does: a client (metadata, as
// the start-up check), a writer (dispatch, dead letters) through
// Transport, and a reader (ingest) through Dialer.
func roundTrip(ctx context.Context, c kafkaconn.Config, value string) error {
	tr, err := c.Transport()
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: tr, Timeout: 5 * time.Second}
	if _, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}}); err != nil {
		return err
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: topic, Transport: tr, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, MaxAttempts: 1}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte(value)}); err != nil {
		return err
	}
	d, err := c.Dialer()
	if err != nil {
		return err
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers, Topic: topic, Partition: 0, Dialer: d, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return err
		}
		if string(m.Value) == value {
			return nil
		}
	}
}

// TestSASL: kafka.sasl with each mechanism (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512, in any case) authenticates the client, the writer and
// the reader; a wrong password or none is refused, without the password in
// the error.
func TestSASL(t *testing.T) {
	t.Parallel()
	brokers := saslCluster(t)
	for _, u := range users {
		t.Run(u.mechanism, func(t *testing.T) {
			for _, mech := range []string{u.mechanism, strings.ToLower(u.mechanism)} {
				c := kafkaConfig(brokers, mech, u.user, u.password)
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if err := roundTrip(ctx, c, "hello "+mech); err != nil {
					t.Errorf("%s as %s: %v", mech, u.user, err)
				}
				cancel()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			wrong := kafkaConfig(brokers, u.mechanism, u.user, "not-"+u.password)
			err := roundTrip(ctx, wrong, "never")
			if err == nil {
				t.Fatalf("%s with a wrong password authenticated", u.mechanism)
			}
			t.Logf("wrong password: %v", err)
			if strings.Contains(err.Error(), wrong.SASL.Password) {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := roundTrip(ctx, kafkaConfig(brokers, "", "", ""), "never")
		if err == nil {
			t.Fatal("a client without SASL was served by a broker that requires it")
		}
		t.Logf("without SASL: %v", err)
	})
}

// TestTLS: kafka.tls verifies the broker with ca_file, and SASL runs over
// it; without the CA the broker's certificate is refused.
func TestTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	brokers := saslCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}))
	u := users[2]
	c := kafkaConfig(brokers, u.mechanism, u.user, u.password)
	c.TLS = tlsconf.Config{Enabled: true, CAFile: certs.CAFile}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := roundTrip(ctx, c, "over tls"); err != nil {
		t.Fatalf("SCRAM over TLS: %v", err)
	}

	noCA := c
	noCA.TLS.CAFile = ""
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	err := roundTrip(ctx2, noCA, "never")
	if err == nil {
		t.Error("a broker signed by an unknown CA was trusted")
	}
	t.Logf("without the CA: %v", err)
	bad := c
	bad.TLS.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "kafka.tls.ca_file") {
		t.Errorf("a missing CA file: %v, want an error naming kafka.tls.ca_file", err)
	}
}

// TestSASLValidate: a bad kafka.sasl section is refused naming the key.
func TestSASLValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sasl kafkaconn.SASLConfig
		want string
	}{
		{kafkaconn.SASLConfig{Mechanism: "GSSAPI", Username: "u"}, "kafka.sasl.mechanism"},
		{kafkaconn.SASLConfig{Mechanism: "PLAIN"}, "kafka.sasl.username"},
		{kafkaconn.SASLConfig{Mechanism: "SCRAM-SHA-1", Username: "u", Password: "p"}, "kafka.sasl.mechanism"},
	} {
		cfg := kafkaconn.DefaultConfig()
		cfg.SASL = c.sasl
		err := cfg.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want+":") {
			t.Errorf("%+v: Validate = %v, want an error about %s", c.sasl, err, c.want)
		}
		if err != nil && c.sasl.Password != "" && strings.Contains(err.Error(), c.sasl.Password) {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}
