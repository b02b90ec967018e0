package redisconn_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

func config(t *testing.T, addr string) redisconn.Config {
	c := redisconn.DefaultConfig()
	c.Addrs = []string{addr}
	c.KeyPrefix = testenv.Prefix(t)
	return c
}

// oneLine fails unless err is a single line that says what and where, and
// does not leak secret.
func oneLine(t *testing.T, err error, secret string, want ...string) {
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

// TestRequirePass: flatline connects to a redis-server started with
// --requirepass through redis.password, and refuses to start without it,
// or with a wrong one, with one clear line that names the server and does
// not echo the password.
func TestRequirePass(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-Redis-pw"
	rs := testenv.Redis(t, "--requirepass", pw)
	ctx := context.Background()

	t.Run("with password", func(t *testing.T) {
		c := config(t, rs.Addr())
		c.Password = pw
		rdb, store, err := app.Connect(ctx, c)
		if err != nil {
			t.Fatalf("connect with redis.password: %v", err)
		}
		defer rdb.Close()
		if err := store.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("without password", func(t *testing.T) {
		_, _, err := app.Connect(ctx, config(t, rs.Addr()))
		oneLine(t, err, pw, rs.Addr(), "NOAUTH")
		t.Logf("without redis.password: %v", err)
	})
	t.Run("wrong password", func(t *testing.T) {
		c := config(t, rs.Addr())
		c.Password = "not-" + pw
		_, _, err := app.Connect(ctx, c)
		oneLine(t, err, c.Password, rs.Addr(), "WRONGPASS")
	})
}

// TestACLUser runs a whole instance as a Redis ACL user that may touch only
// keys and channels under its redis.key_prefix: a device is tracked, times
// out and its event is published, with no permission error on the way. So
// every key flatline uses, scripts included, and its wakes channel are
// under the prefix, and redis.username/password work.
func TestACLUser(t *testing.T) {
	t.Parallel()
	const user, pw = "flatline-svc", "acl-Pass-w0rd"
	prefix := testenv.Prefix(t)
	rs := testenv.Redis(t, "--user", user, "on", ">"+pw, "~"+prefix+":*", "&"+prefix+":*", "+@all")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The user is really confined to the prefix.
	confined := config(t, rs.Addr())
	confined.Username, confined.Password = user, pw
	rdb, err := redisconn.New(ctx, confined)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, "elsewhere", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("ACL user wrote outside its prefix (err %v): the test proves nothing", err)
	}
	bad := confined
	bad.Password = "wrong"
	_, _, err = app.Connect(ctx, bad)
	oneLine(t, err, "wrong", "WRONGPASS")

	k := testenv.Kafka(t, 1, "device-signals", "device-timeouts", "device-signals-dlq")
	cfg := configs.Default()
	cfg.Redis = confined
	cfg.Redis.KeyPrefix = prefix
	cfg.Kafka.Brokers = k.Brokers()
	cfg.Kafka.GroupID = "g-" + prefix
	cfg.HTTP.Addr = ""
	cfg.Timeouts.Default = time.Second
	cfg.Shards.InitialCount = 4
	var logs testenv.SyncBuffer
	a, err := app.New(ctx, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), app.Hooks{})
	if err != nil {
		t.Fatalf("start as ACL user %s: %v", user, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()...), Topic: cfg.Kafka.SignalsTopic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	now := time.Now()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("acl-dev"), Value: []byte(`{"ts":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`), Time: now}); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers(), Topic: cfg.Kafka.TimeoutsTopic, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatalf("no timeout event: %v\n%s", err, logs.String())
	}
	var ev dispatch.Event
	if err := json.Unmarshal(m.Value, &ev); err != nil || ev.DeviceID != "acl-dev" || ev.Type != dispatch.TypeTimeout {
		t.Errorf("event %s (%v)", m.Value, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if out := logs.String(); strings.Contains(out, "NOPERM") || strings.Contains(out, pw) {
		t.Errorf("log shows a permission error or the password:\n%s", out)
	}
}

// TestTLSBuild: redis.tls (also used for kafka.tls) builds the tls.Config
// its fields describe, and refuses files that are missing or hold no
// certificate, naming the key.
func TestTLSBuild(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}

	if tc, err := (tlsconf.Config{}).Build(); tc != nil || err != nil {
		t.Errorf("disabled TLS built %v, %v; want nil, nil", tc, err)
	}
	tc, err := tlsconf.Config{Enabled: true}.Build()
	if err != nil || tc == nil || tc.RootCAs != nil || tc.InsecureSkipVerify || tc.MinVersion != tls.VersionTLS12 || len(tc.Certificates) != 0 {
		t.Errorf("enabled TLS without files: %+v, %v; want system roots, verification on, TLS 1.2+", tc, err)
	}
	full := tlsconf.Config{Enabled: true, CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "localhost"}
	if err := full.Validate("redis.tls"); err != nil {
		t.Fatal(err)
	}
	tc, err = full.Build()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "localhost" || tc.InsecureSkipVerify {
		t.Errorf("built %+v", tc)
	}
	if tc, _ := (tlsconf.Config{Enabled: true, InsecureSkipVerify: true}).Build(); !tc.InsecureSkipVerify {
		t.Error("insecure_skip_verify not applied")
	}

	// The built config really verifies the server with the CA and
	// presents the client certificate to a server that demands one.
	srv := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{certs.Server}, ClientCAs: certs.Pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err := handshake(srv, tc); err != nil {
		t.Errorf("handshake with CA and client certificate: %v", err)
	}
	noClient := full
	noClient.CertFile, noClient.KeyFile = "", ""
	tcNoClient, _ := noClient.Build()
	if err := handshake(srv, tcNoClient); err == nil {
		t.Error("a server demanding a client certificate accepted none")
	}
	system, _ := tlsconf.Config{Enabled: true, ServerName: "localhost"}.Build()
	if err := handshake(srv, system); err == nil || !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Errorf("a server signed by an unknown CA was accepted with the system roots: %v", err)
	}

	for _, c := range []struct {
		name string
		cfg  tlsconf.Config
		want string
	}{
		{"missing CA", tlsconf.Config{Enabled: true, CAFile: "/nonexistent/ca.pem"}, "redis.tls.ca_file"},
		{"cert without key", tlsconf.Config{Enabled: true, CertFile: certs.ClientCert}, "redis.tls: cert_file and key_file go together"},
		{"missing key", tlsconf.Config{Enabled: true, CertFile: certs.ClientCert, KeyFile: "/nonexistent/key.pem"}, "redis.tls.key_file"},
	} {
		err := c.cfg.Validate("redis.tls")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := (tlsconf.Config{Enabled: true, CAFile: junk}).Build(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without a certificate built: %v", err)
	}
	if _, err := (tlsconf.Config{Enabled: true, CertFile: certs.ClientCert, KeyFile: certs.ServerKey}).Build(); err == nil {
		t.Error("a certificate with the wrong key built")
	}
	// A disabled section is not checked: files of an unused TLS setup
	// must not stop the service.
	if err := (tlsconf.Config{CAFile: "/nonexistent"}).Validate("redis.tls"); err != nil {
		t.Errorf("disabled TLS validated its files: %v", err)
	}
}

// TestRedisOverTLS connects through redis.tls to a redis-server that serves
// TLS and requires client certificates (mutual TLS).
func TestRedisOverTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	port := freePort(t)
	testenv.Redis(t, "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey,
		"--tls-ca-cert-file", certs.CAFile, "--tls-auth-clients", "yes")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c := config(t, addr)
	c.TLS = tlsconf.Config{Enabled: true, CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	rdb, store, err := app.Connect(ctx, c)
	if err != nil {
		t.Fatalf("connect over mutual TLS: %v", err)
	}
	defer rdb.Close()
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	noCert := c
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	if rdb, _, err := app.Connect(ctx, noCert); err == nil {
		rdb.Close()
		t.Error("connected without the client certificate the server requires")
	}
	plain := c
	plain.TLS = tlsconf.Config{}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if rdb, _, err := app.Connect(pctx, plain); err == nil {
		rdb.Close()
		t.Error("connected in plain text to the TLS port")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// tlsServer accepts TLS connections on loopback and completes their
// handshakes until the test ends.
func tlsServer(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			_, _ = io.Copy(io.Discard, conn)
			conn.Close()
		}
	}()
	return l.Addr().String()
}

// handshake dials addr with cfg and completes a handshake, reading once so
// that a server's rejection of the client certificate (TLS 1.3 reports it
// after the client's handshake) surfaces.
func handshake(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // the server accepted us and waits for data
	}
	return err
}
