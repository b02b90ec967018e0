package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/freeport"
)

// sentinelReadyTimeout bounds how long the Sentinels may take to find each
// other and the replica (their hello messages go out every 2 s).
const sentinelReadyTimeout = 30 * time.Second

// SentinelOptions shape a SentinelSet; the zero value is a set without
// passwords that fails over one second after its primary stops answering.
type SentinelOptions struct {
	// Master names the master set. Default: "flatline-test".
	Master string
	// Password is the data nodes' requirepass; the replica and the
	// Sentinels are given it (masterauth, sentinel auth-pass).
	Password string
	// SentinelPassword is the Sentinels' own requirepass.
	SentinelPassword string
	// DownAfter is the Sentinels' down-after-milliseconds: how long the
	// primary may be silent before a failover starts. Default: 1s.
	DownAfter time.Duration
	// DataArgs are extra redis-server arguments for both data nodes, after
	// the ones Password adds (e.g. a replication user with "--user",
	// "--masteruser" and "--masterauth").
	DataArgs []string
}

// SentinelSet is a private master set owned by one test: a primary, one
// replica of it, and three Sentinels (quorum 2) that monitor it, each a
// process on its own free loopback port and temp dir, killed in t.Cleanup.
// When the test fails, the tail of every process's log is logged.
type SentinelSet struct {
	t         testing.TB
	opts      SentinelOptions
	servers   []*RedisServer // the primary and the replica, in start order
	sentinels []*RedisServer
}

// RedisSentinel starts a primary, a replica of it (--replicaof) and three
// Sentinels (redis-server --sentinel with a generated config file:
// sentinel monitor <master> <primary> 2, down-after-milliseconds from
// opts, failover-timeout 5 s), and returns once every Sentinel names the
// primary as master, knows the two other Sentinels and the replica, and the
// replica is in sync. It skips the test when redis-server is missing, or
// fails it in CI (env CI=true).
func RedisSentinel(t testing.TB, opts SentinelOptions) *SentinelSet {
	t.Helper()
	if opts.Master == "" {
		opts.Master = "flatline-test"
	}
	if opts.DownAfter <= 0 {
		opts.DownAfter = time.Second
	}
	var dataArgs []string
	if opts.Password != "" {
		// masterauth on both, so whichever is the replica after a
		// failover can sync from the other.
		dataArgs = []string{"--requirepass", opts.Password, "--masterauth", opts.Password}
	}
	dataArgs = append(dataArgs, opts.DataArgs...)
	s := &SentinelSet{t: t, opts: opts}
	primary := Redis(t, dataArgs...)
	replica := Redis(t, append(dataArgs, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))...)
	s.servers = []*RedisServer{primary, replica}
	for range 3 {
		s.sentinels = append(s.sentinels, s.startSentinel(primary.port))
	}
	// Registered after the processes and their temp dirs, so it runs
	// before they are killed and their logs removed.
	t.Cleanup(s.dumpOnFailure)
	if err := s.waitReady(sentinelReadyTimeout); err != nil {
		t.Fatalf("testenv: Sentinel set %s: %v", opts.Master, err)
	}
	return s
}

// startSentinel starts one Sentinel monitoring the primary on port.
func (s *SentinelSet) startSentinel(primaryPort int) *RedisServer {
	t := s.t
	t.Helper()
	n := newServer(t, s.opts.SentinelPassword, nil)
	m := s.opts.Master
	conf := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", m, primaryPort),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", m, s.opts.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s 5000", m),
		fmt.Sprintf("sentinel parallel-syncs %s 1", m),
	}
	if s.opts.Password != "" {
		conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", m, s.opts.Password))
	}
	if s.opts.SentinelPassword != "" {
		conf = append(conf, "requirepass "+s.opts.SentinelPassword)
	}
	n.sentinelConf = filepath.Join(n.dir, "sentinel.conf")
	err := n.startOnFreePort(freeport.Loopback, func() {
		// Sentinel rewrites its file (its id, what it learnt): start each
		// attempt from the generated one.
		if err := os.WriteFile(n.sentinelConf, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("testenv: start sentinel: %v", err)
	}
	return n
}

// Master is the name of the master set (redis.sentinel.master).
func (s *SentinelSet) Master() string { return s.opts.Master }

// Addrs are the Sentinels' host:port addresses (redis.addrs).
func (s *SentinelSet) Addrs() []string { return addrs(s.sentinels) }

// Sentinels are the Sentinel processes.
func (s *SentinelSet) Sentinels() []*RedisServer { return s.sentinels }

// Servers are the data nodes, the first primary and its first replica, in
// start order; their roles swap with a failover (see Primary).
func (s *SentinelSet) Servers() []*RedisServer { return s.servers }

// Primary is the data node the Sentinels name as master right now, once
// they all agree on it and it answers as one (see WaitFailover). It fails
// the test when they do not agree within 30 s.
func (s *SentinelSet) Primary() *RedisServer {
	s.t.Helper()
	p, err := s.waitAgree(nil, sentinelReadyTimeout)
	if err != nil {
		s.t.Fatalf("testenv: Sentinel set %s: %v", s.opts.Master, err)
	}
	return p
}

// Replica is the data node that is not Primary.
func (s *SentinelSet) Replica() *RedisServer {
	s.t.Helper()
	p := s.Primary()
	for _, n := range s.servers {
		if n != p {
			return n
		}
	}
	return nil
}

// WaitFailover waits until every Sentinel names a master other than old
// and that server answers ROLE as master, and returns it: after a test
// killed old (Kill) or stopped it. It fails the test after timeout.
func (s *SentinelSet) WaitFailover(old *RedisServer, timeout time.Duration) *RedisServer {
	s.t.Helper()
	p, err := s.waitAgree(old, timeout)
	if err != nil {
		s.t.Fatalf("testenv: Sentinel set %s: no failover away from %s: %v", s.opts.Master, old.Addr(), err)
	}
	return p
}

// WaitSettled waits until every running Sentinel has named master, with
// no other flag than "master" (not subjectively or objectively down, no
// failover under way), for steady without a break, failing the test after
// timeout. Under load a Sentinel may judge a just-promoted master down and
// fail over again; a test that brings the old master back, empty, waits
// here first, so that such a second failover finds no replica to promote
// instead of promoting the empty one.
func (s *SentinelSet) WaitSettled(master *RedisServer, steady, timeout time.Duration) {
	s.t.Helper()
	var since time.Time
	err := poll(time.Now().Add(timeout), func(ctx context.Context) error {
		for _, n := range s.sentinels {
			if !n.running() {
				continue
			}
			sc := s.sentinelClient(n)
			m, err := sc.Master(ctx, s.opts.Master).Result()
			_ = sc.Close()
			if err == nil && (m["flags"] != "master" || m["ip"]+":"+m["port"] != master.Addr()) {
				err = fmt.Errorf("sentinel %s sees %s:%s with flags %s", n.Addr(), m["ip"], m["port"], m["flags"])
			}
			if err != nil {
				since = time.Time{}
				return err
			}
		}
		if since.IsZero() {
			since = time.Now()
		}
		if held := time.Since(since); held < steady {
			return fmt.Errorf("settled for %v of %v", held.Round(time.Millisecond), steady)
		}
		return nil
	})
	if err != nil {
		s.t.Fatalf("testenv: Sentinel set %s: not settled on %s: %v", s.opts.Master, master.Addr(), err)
	}
}

// Client returns a failover client of the set (through the Sentinels),
// closed in t.Cleanup.
func (s *SentinelSet) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.opts.Master, SentinelAddrs: s.Addrs(),
		SentinelPassword: s.opts.SentinelPassword, Password: s.opts.Password,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitReady waits until the set can fail over: every Sentinel names
// primary, knows the two others and the replica, and the replica's link
// to primary is up.
func (s *SentinelSet) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if _, err := s.waitAgree(nil, timeout); err != nil {
		return err
	}
	primary, replica := s.servers[0], s.servers[1]
	rc := s.dataClient(replica)
	defer rc.Close()
	for _, n := range s.sentinels {
		sc := s.sentinelClient(n)
		err := poll(deadline, func(ctx context.Context) error {
			m, err := sc.Master(ctx, s.opts.Master).Result()
			if err != nil {
				return err
			}
			if m["num-other-sentinels"] != "2" || m["num-slaves"] != "1" || m["flags"] != "master" {
				return fmt.Errorf("sentinel %s sees flags %s, %s other sentinels, %s replicas", n.Addr(), m["flags"], m["num-other-sentinels"], m["num-slaves"])
			}
			return nil
		})
		_ = sc.Close()
		if err != nil {
			return err
		}
	}
	return poll(deadline, func(ctx context.Context) error {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s not in sync with %s", replica.Addr(), primary.Addr())
		}
		return nil
	})
}

// waitAgree waits until every running Sentinel names the same master, other
// than not (when given), and that data node answers ROLE as master.
func (s *SentinelSet) waitAgree(not *RedisServer, timeout time.Duration) (*RedisServer, error) {
	var found *RedisServer
	err := poll(time.Now().Add(timeout), func(ctx context.Context) error {
		found = nil
		addr := ""
		for _, n := range s.sentinels {
			if !n.running() {
				continue
			}
			sc := s.sentinelClient(n)
			a, err := sc.GetMasterAddrByName(ctx, s.opts.Master).Result()
			_ = sc.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %v", n.Addr(), err)
			}
			got := strings.Join(a, ":")
			if addr != "" && got != addr {
				return fmt.Errorf("sentinels disagree: %s and %s", addr, got)
			}
			addr = got
		}
		for _, d := range s.servers {
			if d.Addr() == addr {
				found = d
			}
		}
		switch {
		case found == nil:
			return fmt.Errorf("sentinels name %q, none of %v", addr, s.servers)
		case found == not:
			return fmt.Errorf("sentinels still name %s", addr)
		}
		dc := s.dataClient(found)
		role, err := dc.Do(ctx, "ROLE").Slice()
		_ = dc.Close()
		if err != nil {
			return fmt.Errorf("%s: ROLE: %v", addr, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s is not master yet: %v", addr, role)
		}
		return nil
	})
	return found, err
}

func (s *SentinelSet) dataClient(n *RedisServer) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), Password: s.opts.Password, MaxRetries: -1, PoolSize: 1})
}

func (s *SentinelSet) sentinelClient(n *RedisServer) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: n.Addr(), Password: s.opts.SentinelPassword, MaxRetries: -1, PoolSize: 1})
}

// dumpOnFailure logs the tail of every process's log when the test failed.
func (s *SentinelSet) dumpOnFailure() {
	if !s.t.Failed() {
		return
	}
	for i, n := range s.servers {
		s.t.Logf("testenv: data node %d (%s) log tail:\n%s", i, n.Addr(), n.logTail(40))
	}
	for i, n := range s.sentinels {
		s.t.Logf("testenv: sentinel %d (%s) log tail:\n%s", i, n.Addr(), n.logTail(40))
	}
}
