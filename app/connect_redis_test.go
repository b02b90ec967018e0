package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/internal/testenv"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

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
		c := testenv.RedisConfig(t, rs.Addr())
		c.Password = pw
		connectAndPing(ctx, t, c, "connect with redis.password")
	})
	t.Run("without password", func(t *testing.T) {
		_, _, err := app.Connect(ctx, testenv.RedisConfig(t, rs.Addr()))
		testenv.OneLineError(t, err, pw, rs.Addr(), "NOAUTH")
		t.Logf("without redis.password: %v", err)
	})
	t.Run("wrong password", func(t *testing.T) {
		c := testenv.RedisConfig(t, rs.Addr())
		c.Password = "not-" + pw
		_, _, err := app.Connect(ctx, c)
		testenv.OneLineError(t, err, c.Password, rs.Addr(), "WRONGPASS")
	})
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

	c := testenv.RedisConfig(t, rs.Addr())
	c.PasswordFile = testenv.SecretFile(t, pw+"\n")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	connectAndPing(ctx, t, c, "connect with redis.password_file")

	wrong := testenv.RedisConfig(t, rs.Addr())
	wrong.PasswordFile = testenv.SecretFile(t, "not-"+pw)
	_, _, err := app.Connect(ctx, wrong)
	testenv.OneLineError(t, err, "not-"+pw, rs.Addr(), "WRONGPASS")
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
	confined := testenv.RedisConfig(t, rs.Addr())
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
	testenv.OneLineError(t, err, "wrong", "WRONGPASS")

	k := testenv.Kafka(t, 1, "device-signals", "device-timeouts", "device-signals-dlq")
	cfg := startConfig(t, confined.Addrs, k.Brokers())
	cfg.Redis = confined
	cfg.Redis.KeyPrefix = prefix
	cfg.Kafka.GroupID = "g-" + prefix
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

	c := testenv.RedisConfig(t, addr)
	c.TLS = tlsconf.Config{Enabled: true, CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	connectAndPing(ctx, t, c, "connect over mutual TLS")

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

// TestUnreachableInAutoMode: a server that does not answer is one line
// naming its address, within the connect timeout.
func TestUnreachableInAutoMode(t *testing.T) {
	t.Parallel()
	addr := refusingAddr(t)
	_, _, err := app.Connect(context.Background(), testenv.RedisConfig(t, addr))
	testenv.OneLineError(t, err, "", "redis "+addr, "connection refused")
	t.Logf("unreachable: %v", err)
}

// TestSentinelMode: through Sentinels that require their own password, to
// data nodes that require theirs, writes reach the primary; wrong Sentinel
// credentials are one line; both passwords may come from files.
func TestSentinelMode(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	const dataPW, sentinelPW = "data-Pw-1", "sentinel-Pw-2"
	s := testenv.RedisSentinel(t, testenv.SentinelOptions{Password: dataPW, SentinelPassword: sentinelPW})
	c := redisconn.DefaultConfig()
	c.Mode = redisconn.ModeSentinel
	c.Addrs = s.Addrs()
	c.KeyPrefix = testenv.Prefix(t)
	c.Sentinel.Master = s.Master()
	c.Password = dataPW
	c.Sentinel.Password = sentinelPW
	rdb, store, err := app.Connect(ctx, c)
	if err != nil {
		t.Fatalf("connect through the sentinels: %v", err)
	}
	defer rdb.Close()
	if redisconn.ModeOf(rdb, c) != redisconn.ModeSentinel {
		t.Errorf("mode %s", redisconn.ModeOf(rdb, c))
	}
	if _, err := store.RegisterClasses(ctx, []string{"cam"}); err != nil {
		t.Fatal(err)
	}
	primary := s.Primary().Client(t)
	if n, err := primary.HLen(ctx, store.Keys().Classes()).Result(); err != nil || n == 0 {
		t.Errorf("the write did not reach the primary %s: %d fields (%v)", s.Primary().Addr(), n, err)
	}
	st := redisconn.ReadStatus(ctx, rdb, c)
	if st.Mode != redisconn.ModeSentinel || st.Replicas != 1 || st.Error != "" {
		t.Errorf("status %+v; want sentinel with 1 replica", st)
	}

	bad := c
	bad.Sentinel.Password = "wrong"
	_, _, err = app.Connect(ctx, bad)
	testenv.OneLineError(t, err, "wrong", "redis")
	t.Logf("wrong sentinel password: %v", err)

	// Both passwords from files, as Kubernetes mounts Secrets.
	files := c
	files.Password, files.PasswordFile = "", testenv.SecretFile(t, dataPW+"\n")
	files.Sentinel.Password, files.Sentinel.PasswordFile = "", testenv.SecretFile(t, sentinelPW+"\n")
	if err := files.Validate(); err != nil {
		t.Fatal(err)
	}
	connectAndPing(ctx, t, files, "connect through the sentinels with password files")
}

// connectAndPing connects to Redis on c as serve does (app.Connect) and
// pings through the store it returns, failing t with what, the error
// appended, when the connection is refused.
func connectAndPing(ctx context.Context, t *testing.T, c redisconn.Config, what string) {
	t.Helper()
	rdb, store, err := app.Connect(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer rdb.Close()
	if err := store.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// refusingAddr is a loopback address where nothing listens for as long as
// the test runs: a port bound by a socket that never listens, so a
// connection is refused and no other server of a parallel test can take
// the port (a free port merely looked up can be, and a TLS server there
// answers a plain client with EOF).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
