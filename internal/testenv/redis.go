package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/shard"
)

// How long a redis-server gets to answer after it was started, and to exit
// after SIGTERM (an AOF rewrite on shutdown can take a moment under -race).
const (
	redisStartTimeout = 15 * time.Second
	redisStopTimeout  = 15 * time.Second
	// Attempts at a fresh port when another process took ours between
	// choosing it and redis-server binding it.
	redisPortAttempts = 5
)

// errAddrInUse means redis-server could not bind its port.
var errAddrInUse = errors.New("address already in use")

// RedisServer is a private redis-server process owned by one test.
type RedisServer struct {
	t        testing.TB
	bin      string
	dir      string
	extra    []string
	password string
	port     int
	// sentinelConf, when set, runs the process as a Sentinel with this
	// config file (which Sentinel rewrites as it learns).
	sentinelConf string

	mu   sync.Mutex
	proc *Process // nil while stopped
}

// Redis starts a private redis-server on a free loopback port with no
// persistence (--save "" --appendonly no) in a fresh t.TempDir(), followed by
// extraArgs ("--requirepass", "x" or "--appendonly", "yes": later arguments
// override earlier ones). It returns once the server answers, and kills it in
// t.Cleanup.
//
// When redis-server is not on PATH the test is skipped, or fails when the
// environment variable CI is set (CI=true).
func Redis(t testing.TB, extraArgs ...string) *RedisServer {
	t.Helper()
	s := newServer(t, argValue(extraArgs, "--requirepass"), extraArgs)
	if err := s.startOnFreePort(freeport.Loopback, nil); err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	return s
}

// newServer is a redis-server of t's, not started yet: the binary from
// PATH (lookTool), a fresh t.TempDir(), extra (copied) after the default
// arguments, and a kill in t.Cleanup.
func newServer(t testing.TB, password string, extra []string) *RedisServer {
	t.Helper()
	s := &RedisServer{
		t:        t,
		bin:      lookTool(t, "redis-server", "redis-server"),
		dir:      t.TempDir(),
		extra:    append([]string(nil), extra...),
		password: password,
	}
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.kill)
	return s
}

// lookTool finds name on PATH, skipping the test (failing it in CI) when it
// is missing; pkg is the Debian package that provides it.
func lookTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if InCI() {
			t.Fatalf("testenv: %s not found on PATH (Debian package %s; CI must not skip Redis tests): %v", name, pkg, err)
		}
		t.Skipf("testenv: %s not found on PATH (Debian package %s): %v", name, pkg, err)
	}
	return p
}

// StartRedis is Redis for a program outside go test (the benchmarks): a
// private redis-server from PATH, on a free loopback port, without
// persistence, in a temporary directory of its own, extraArgs following
// the defaults. A missing redis-server is an error: no program measures a
// stand-in. Close ends the server and removes the directory; Stop, Start
// and Kill are for tests' servers.
func StartRedis(extraArgs ...string) (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH: %w", err)
	}
	dir, err := os.MkdirTemp("", "flatline-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{
		bin:      bin,
		dir:      dir,
		extra:    append([]string(nil), extraArgs...),
		password: argValue(extraArgs, "--requirepass"),
	}
	if err := s.startOnFreePort(freeport.Loopback, nil); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return s, nil
}

// Close ends a server StartRedis started — SIGTERM, and SIGKILL when it
// has not exited within redisStopTimeout — and removes its directory.
func (s *RedisServer) Close() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop(redisStopTimeout)
	}
	_ = os.RemoveAll(s.dir)
}

// startOnFreePort starts s on a port pick finds free, and on another when
// some process took that one first (up to redisPortAttempts times);
// prepare, if not nil, runs before each attempt.
func (s *RedisServer) startOnFreePort(pick func() (int, error), prepare func()) error {
	for attempt := 1; ; attempt++ {
		if prepare != nil {
			prepare()
		}
		port, err := pick()
		if err != nil {
			return err
		}
		s.port = port
		err = s.start()
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == redisPortAttempts {
			return err
		}
	}
}

// InCI reports whether the tests run in CI (env CI set, and not "false" or "0").
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// addrs are the host:port addresses of servers, in order.
func addrs(servers []*RedisServer) []string {
	out := make([]string, len(servers))
	for i, n := range servers {
		out[i] = n.Addr()
	}
	return out
}

// Client returns a client of the server (authenticated when the server was
// started with --requirepass), closed in t.Cleanup.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.password})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop shuts the server down with SIGTERM and waits for it to exit, as in an
// outage. With --appendonly yes its data survives a later Start. Stopping a
// stopped server does nothing.
func (s *RedisServer) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	if _, inTime := p.Stop(redisStopTimeout); !inTime {
		s.t.Errorf("testenv: redis-server on %s ignored SIGTERM for %v; killed", s.Addr(), redisStopTimeout)
	}
}

// Start restarts a stopped server on the same port with the same arguments
// and directory, and waits until it answers. Starting a running server does
// nothing.
func (s *RedisServer) Start() {
	s.t.Helper()
	// The port was ours a moment ago; retry briefly in case a concurrent
	// dial or bind holds it right now.
	var err error
	for attempt := 1; attempt <= redisPortAttempts; attempt++ {
		if err = s.start(); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("testenv: restart redis-server on %s: %v", s.Addr(), err)
	}
}

// start launches redis-server on s.port and waits until that process (and
// not some other server that took the port) answers.
func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil
	}
	logPath := filepath.Join(s.dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	var args []string
	if s.sentinelConf != "" {
		args = []string{s.sentinelConf, "--sentinel"}
	}
	args = append(args, []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
	}...)
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = serverProcAttr()
	p, err := StartProcess(cmd)
	// The child writes to a descriptor of its own.
	_ = logf.Close()
	if err != nil {
		return err
	}

	err = waitRedis(p, s.Addr(), s.password)
	if err != nil {
		p.Kill()
		out := readFrom(logPath, logStart)
		if bytes.Contains(out, []byte("Address already in use")) {
			return fmt.Errorf("port %d: %w", s.port, errAddrInUse)
		}
		return fmt.Errorf("%w; redis-server output:\n%s", err, out)
	}
	s.proc = p
	return nil
}

// waitRedis polls until the server at addr answers INFO with p's process id.
func waitRedis(p *Process, addr, password string) error {
	c := redis.NewClient(&redis.Options{
		Addr:        addr,
		Password:    password,
		MaxRetries:  -1,
		DialTimeout: time.Second,
		PoolSize:    1,
	})
	defer c.Close()
	want := "process_id:" + strconv.Itoa(p.Pid()) + "\r\n"
	deadline := time.Now().Add(redisStartTimeout)
	var last error
	for {
		select {
		case <-p.Done():
			return fmt.Errorf("redis-server exited: %v", p.Err())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		switch {
		case err == nil && strings.Contains(info, want):
			return nil
		case err == nil:
			last = errors.New("another server answers on this port")
		default:
			last = err // typically connection refused, or LOADING
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer within %v: %v", redisStartTimeout, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether the process is up (not stopped or killed).
func (s *RedisServer) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Kill ends the server with SIGKILL, as a crash or a lost machine: no
// shutdown save, connections dropped at once. Start brings it back.
// Killing a stopped server does nothing.
func (s *RedisServer) Kill() { s.kill() }

// Log is everything the server wrote to its log file so far, across
// restarts.
func (s *RedisServer) Log() string {
	return string(readFrom(filepath.Join(s.dir, "redis.log"), 0))
}

// logTail is the last n lines of the server's log, for a failed test's
// report.
func (s *RedisServer) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kill ends the server at cleanup without a graceful shutdown.
func (s *RedisServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.proc; p != nil {
		s.proc = nil
		p.Kill()
	}
}

// PID is the running server's process id (0 while it is stopped).
func (s *RedisServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// argValue returns the argument following name in args (the last one wins,
// as in redis-server), or "".
func argValue(args []string, name string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			v = args[i+1]
		}
	}
	return v
}

func readFrom(path string, off int64) []byte {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return nil
	}
	return b[off:]
}

// Store returns a shard.Store over a private redis-server (started with
// extraArgs, as Redis) under a fresh key prefix, its scripts loaded, and
// the server.
func Store(tb testing.TB, extraArgs ...string) (*shard.Store, *RedisServer) {
	tb.Helper()
	srv := Redis(tb, extraArgs...)
	st := shard.NewStore(srv.Client(tb), shard.NewKeys(Prefix(tb)))
	if err := st.LoadScripts(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return st, srv
}
