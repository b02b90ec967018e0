// Package redisconn builds the go-redis client from the redis section of the
// configuration, for the deployment redis.mode names: a standalone server, a
// Redis Cluster (several seed nodes, or one configuration endpoint), or a
// master set watched by Sentinels. It also reads the server facts the
// start-up checks and /status report (inspect.go).
package redisconn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flatline-dev/flatline/internal/confcheck"
	"github.com/flatline-dev/flatline/internal/secret"
	"github.com/flatline-dev/flatline/internal/tlsconf"
)

// quiet drops go-redis's own log lines (one per failed dial): flatline's
// stages log outages once when they begin and end instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var silence sync.Once

// clusterReload is how often the cluster client re-reads the slot map when
// nothing told it to. A master that died answers no MOVED, so without this
// the client would keep sending its slots' writes to the dead address until
// go-redis's default (60 s) passed, long after a replica took over. One
// CLUSTER SLOTS a second is little load.
const clusterReload = time.Second

// The values of redis.mode.
const (
	// ModeAuto picks cluster for several addresses; for one, cluster when
	// that server has cluster mode enabled (a managed cluster's
	// configuration endpoint), else standalone.
	ModeAuto = "auto"
	// ModeStandalone is one server (a primary; its replicas are not used).
	ModeStandalone = "standalone"
	// ModeCluster is a Redis Cluster reached through any of its nodes.
	ModeCluster = "cluster"
	// ModeSentinel is the master of a set that Sentinels watch and fail
	// over: redis.addrs are the Sentinels.
	ModeSentinel = "sentinel"
)

var modes = []string{ModeAuto, ModeStandalone, ModeCluster, ModeSentinel}

// Config is the redis section of the configuration.
type Config struct {
	// Mode is the deployment: auto, standalone, cluster or sentinel.
	// Default: auto.
	Mode string `config:"mode"`
	// Addrs are host:port addresses: the server (standalone), seed nodes or
	// a configuration endpoint (cluster), or the Sentinels (sentinel).
	// Default: [127.0.0.1:6379].
	Addrs []string `config:"addrs"`
	// Username and Password authenticate to the data nodes (ACL user or
	// requirepass); with Sentinel, to the master and replicas.
	Username string `config:"username"`
	Password string `config:"password"`
	// PasswordFile names a file holding Password instead (a mounted
	// Kubernetes Secret), read when the client is built; set one of the
	// two. Default: "" (none).
	PasswordFile string `config:"password_file"`
	// DB selects the database (standalone and sentinel; a cluster has only
	// db 0). Default: 0.
	DB int `config:"db"`
	// KeyPrefix starts every key flatline writes. Default: flatline.
	KeyPrefix string `config:"key_prefix"`
	// WaitReplicas, when above 0, makes an ingest batch count as written
	// only once WAIT confirms that this many replicas of every master it
	// touched have it: only then are its offsets committed and watermarks
	// raised, so a failover to a replica loses no acknowledged reset.
	// Default: 0 (no wait).
	WaitReplicas int `config:"wait_replicas"`
	// WaitTimeout is how long one WAIT waits for the replicas; a batch
	// they did not confirm by then is written again. Default: 1s.
	WaitTimeout time.Duration `config:"wait_timeout"`
	// Sentinel names the master set and the Sentinels' own credentials
	// (redis.mode sentinel only).
	Sentinel SentinelConfig `config:"sentinel"`
	// TLS configures a TLS connection, to every node and, with Sentinel, to
	// the Sentinels too.
	TLS tlsconf.Config `config:"tls"`
}

// SentinelConfig is the redis.sentinel section.
type SentinelConfig struct {
	// Master is the name of the master set the Sentinels monitor.
	Master string `config:"master"`
	// Username and Password authenticate to the Sentinels themselves
	// (their requirepass or an ACL user of theirs); empty for none.
	Username string `config:"username"`
	Password string `config:"password"`
	// PasswordFile names a file holding Password instead, read when the
	// client is built; set one of the two. Default: "" (none).
	PasswordFile string `config:"password_file"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Mode: ModeAuto, Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: "flatline", WaitTimeout: time.Second}
}

// Validate checks the section; errors name the offending key.
func (c Config) Validate() error {
	if !slices.Contains(modes, c.Mode) {
		return fmt.Errorf("redis.mode: must be one of %s, got %q", strings.Join(modes, ", "), c.Mode)
	}
	if len(c.Addrs) == 0 {
		return fmt.Errorf("redis.addrs: at least one address is required")
	}
	for _, a := range c.Addrs {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("redis.addrs: %q is not host:port", a)
		}
	}
	if err := confcheck.NotNegative("redis.db", c.DB); err != nil {
		return err
	}
	switch {
	case c.Mode == ModeStandalone && len(c.Addrs) > 1:
		return fmt.Errorf("redis.addrs: redis.mode standalone takes one address, got %d (several are a cluster's nodes or the sentinels)", len(c.Addrs))
	case c.DB != 0 && (c.Mode == ModeCluster || c.Mode == ModeAuto && len(c.Addrs) > 1):
		return fmt.Errorf("redis.db: a Redis Cluster has only db 0, got %d", c.DB)
	case c.Mode == ModeSentinel && c.Sentinel.Master == "":
		return fmt.Errorf("redis.sentinel.master: required with redis.mode sentinel: the name of the master set the sentinels monitor")
	case c.Mode != ModeSentinel && c.Sentinel != (SentinelConfig{}):
		return fmt.Errorf("redis.sentinel: set, but redis.mode is %s: set redis.mode: sentinel to reach the master through the sentinels in redis.addrs", c.Mode)
	}
	if c.KeyPrefix == "" || strings.ContainsAny(c.KeyPrefix, "{} \t\n") {
		return fmt.Errorf("redis.key_prefix: must be non-empty without braces or spaces, got %q", c.KeyPrefix)
	}
	if err := confcheck.NotNegative("redis.wait_replicas", c.WaitReplicas); err != nil {
		return err
	}
	if c.WaitTimeout <= 0 {
		return fmt.Errorf("redis.wait_timeout: must be positive, got %s", c.WaitTimeout)
	}
	// The files are read here too, so that a missing or unreadable one
	// fails `config validate` and the start, naming the key, rather than
	// the first connection.
	if _, err := c.passwords(); err != nil {
		return err
	}
	return c.TLS.Validate("redis.tls")
}

// passwords returns c with its passwords read from their files, if set
// there.
func (c Config) passwords() (Config, error) {
	pw, err := secret.Password("redis.password", c.Password, c.PasswordFile)
	if err != nil {
		return Config{}, err
	}
	spw, err := secret.Password("redis.sentinel.password", c.Sentinel.Password, c.Sentinel.PasswordFile)
	if err != nil {
		return Config{}, err
	}
	c.Password, c.PasswordFile = pw, ""
	c.Sentinel.Password, c.Sentinel.PasswordFile = spw, ""
	return c, nil
}

// readTimeout is the client's socket read timeout: go-redis's default (0
// means 5s) unless ingest waits for replicas. A pipeline's replies are read
// under one deadline, and ingest sends WAIT in the pipeline of the writes
// it waits for (see shard.Durability), so then the deadline grows by
// wait_timeout.
func (c Config) readTimeout() time.Duration {
	if c.WaitReplicas == 0 {
		return 0
	}
	return 5*time.Second + c.WaitTimeout
}

// Client is the client New builds. Outside shard and this package it is
// held only to build the store on (shard.NewStore), to ask this package
// about the deployment (Inspect, ReadStatus, ModeOf) and to be closed by
// its owner: flatline's keys are read and written through shard.Store
// alone, so that one package knows how each is kept.
type Client = redis.UniversalClient

// New builds the client for c's mode: a ClusterClient for a cluster, a
// failover Client for sentinel, a Client for a standalone server. In auto
// mode with one address it first asks that server, within ctx, whether
// cluster mode is enabled; the other modes send nothing before the first
// command. Errors are one line naming the address. ModeOf tells which mode
// a client was built for.
//
// Its clients honour the deadline of a call's context (go-redis's
// ContextTimeoutEnabled): a call without one waits up to the socket
// timeouts, as before; a call with one (/readyz, /status, an ingest write
// that must give up in time to leave the consumer group) returns by it
// even when Redis does not answer at all (a network that drops packets),
// instead of after the read timeout and go-redis's retries. Only a
// deadline counts: a cancelled context without one does not cut a
// command short.
func New(ctx context.Context, c Config) (Client, error) {
	silence.Do(func() { redis.SetLogger(quiet{}) })
	c, err := c.passwords()
	if err != nil {
		return nil, err
	}
	tc, err := c.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("redis.tls: %w", err)
	}
	mode := c.Mode
	if mode == ModeAuto || mode == "" {
		if mode, err = detect(ctx, c, tc); err != nil {
			return nil, err
		}
	}
	switch mode {
	case ModeCluster:
		if c.DB != 0 {
			return nil, fmt.Errorf("redis.db: %s has cluster mode enabled, and a Redis Cluster has only db 0, got %d", c.Addrs[0], c.DB)
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: tc,
			ClusterStateReloadInterval: clusterReload, ReadTimeout: c.readTimeout(),
			ContextTimeoutEnabled: true,
		}), nil
	case ModeSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: c.Sentinel.Master, SentinelAddrs: c.Addrs,
			SentinelUsername: c.Sentinel.Username, SentinelPassword: c.Sentinel.Password,
			Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tc,
			ReadTimeout: c.readTimeout(), ContextTimeoutEnabled: true,
		}), nil
	default:
		return redis.NewClient(&redis.Options{
			Addr: c.Addrs[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tc,
			ReadTimeout: c.readTimeout(), ContextTimeoutEnabled: true,
		}), nil
	}
}

// ModeOf is the mode New built rdb for, from c: cluster, sentinel or
// standalone (never auto).
func ModeOf(rdb Client, c Config) string {
	switch {
	case isCluster(rdb):
		return ModeCluster
	case c.Mode == ModeSentinel:
		return ModeSentinel
	default:
		return ModeStandalone
	}
}

func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}
