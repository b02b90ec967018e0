package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/flatline-dev/flatline/internal/freeport"
	"github.com/flatline-dev/flatline/internal/redisconn"
)

// redisKind says which Redis startRedis started.
type redisKind string

const (
	// kindRedisServer is a redis-server child process found on PATH.
	kindRedisServer redisKind = "redis-server"
	// kindMiniredis is the in-process github.com/alicebob/miniredis/v2 server,
	// the fallback when redis-server is not installed. It implements the
	// commands and Lua scripting flatline uses, single-threaded and in
	// memory; good for a demo, not for load figures.
	kindMiniredis redisKind = "miniredis"
)

const (
	redisStartTimeout = 10 * time.Second
	redisStopTimeout  = 5 * time.Second
	redisPortAttempts = 5
)

// startRedis starts a Redis without persistence on a free 127.0.0.1 port:
// redis-server from PATH as a child process, or, when it is not installed, an
// in-process miniredis. ctx bounds the start only; stop ends the server (the
// child is also killed if this process dies).
func startRedis(ctx context.Context) (addr string, kind redisKind, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if err := ctx.Err(); err != nil {
			return "", "", nil, err
		}
		m := miniredis.NewMiniRedis()
		// TTLs (scanner leases) expire with the wall clock, as in Redis;
		// miniredis otherwise only expires keys on FastForward.
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return "", "", nil, fmt.Errorf("start miniredis: %w", err)
		}
		return m.Addr(), kindMiniredis, m.Close, nil
	}
	for attempt := 1; ; attempt++ {
		addr, stop, err = startRedisServer(ctx, bin)
		if err == nil {
			return addr, kindRedisServer, stop, nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == redisPortAttempts {
			return "", "", nil, fmt.Errorf("start redis-server: %w", err)
		}
	}
}

var errAddrInUse = errors.New("address already in use")

func startRedisServer(ctx context.Context, bin string) (string, func(), error) {
	port, err := freeport.Loopback()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "flatline-dev-redis-")
	if err != nil {
		return "", nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	logf, err := os.Create(logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--zset-max-listpack-entries", strconv.Itoa(redisconn.ZsetListpackEntries),
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	stop := func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(redisStopTimeout):
				_ = cmd.Process.Kill()
				<-done
			}
		}
		_ = os.RemoveAll(dir)
	}

	if err := waitReady(ctx, addr, cmd.Process.Pid, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		out, _ := os.ReadFile(logPath)
		_ = os.RemoveAll(dir)
		if bytes.Contains(out, []byte("Address already in use")) {
			return "", nil, fmt.Errorf("port %d: %w", port, errAddrInUse)
		}
		if waitErr != nil {
			err = fmt.Errorf("%w (%v)", err, waitErr)
		}
		return "", nil, fmt.Errorf("%w; output:\n%s", err, out)
	}
	return addr, stop, nil
}

// waitReady polls addr until the redis-server with process id pid answers
// (and not another server that took the port between freeport.Loopback and
// our bind).
func waitReady(ctx context.Context, addr string, pid int, done <-chan struct{}) error {
	want := []byte("process_id:" + strconv.Itoa(pid) + "\r\n")
	deadline := time.Now().Add(redisStartTimeout)
	for {
		select {
		case <-done:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if infoHas(addr, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within %v", addr, redisStartTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoHas sends an inline INFO server to addr and reports whether the
// reply contains want.
func infoHas(addr string, want []byte) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return false
	}
	var got []byte
	buf := make([]byte, 4<<10)
	for len(got) < 64<<10 {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if bytes.Contains(got, want) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}
