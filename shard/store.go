package shard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *redis.Script {
	src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("shard: missing script %s: %v", name, err))
	}
	return redis.NewScript(string(src))
}

var (
	scriptDownClr     = loadScript("down_clear")
	scriptDownCnt     = loadScript("down_count")
	scriptFired       = loadScript("fired")
	scriptRemoveIf    = loadScript("remove_if")
	scriptForget      = loadScript("forget")
	scriptWMRaise     = loadScript("watermark_raise")
	scriptClasses     = loadScript("classes_register")
	scriptRenew       = loadScript("lease_renew")
	scriptRenewMany   = loadScript("lease_renew_many")
	scriptRelease     = loadScript("lease_release")
	scriptLayout      = loadScript("layout_set")
	scriptStallMark   = loadScript("stall_mark")
	scriptStallEnd    = loadScript("stall_end")
	scriptStallExpire = loadScript("stall_expire")
	scriptStormName   = loadScript("storm_name")
	scriptReenter     = loadScript("reenter")
	scriptRescore     = loadScript("rescore")
	scriptOrphanRet   = loadScript("orphan_return")
	allScripts        = []*redis.Script{scriptDownClr, scriptDownCnt, scriptFired, scriptRemoveIf, scriptForget,
		scriptWMRaise, scriptClasses, scriptRenew, scriptRenewMany, scriptRelease, scriptLayout,
		scriptStallMark, scriptStallEnd, scriptStallExpire, scriptStormName, scriptReenter, scriptRescore, scriptOrphanRet}
)

// Store is flatline's Redis store. It is safe for concurrent use.
type Store struct {
	rdb  redis.UniversalClient
	keys Keys
	// downs remembers per shard whether its down set existed at its last
	// write (see Write).
	downs [MaxShards]atomic.Bool
	// awaitedOn remembers per shard whether its awaited set existed when
	// a write last looked (awaitedAt, Unix ms): see lookAwaited.
	awaitedOn [MaxShards]atomic.Bool
	awaitedAt [MaxShards]atomic.Int64
	dur       Durability
	wakes     Wakes
}

// Options configure a Store.
type Options struct {
	// Keys builds every key the store reads and writes (NewKeys).
	Keys Keys
	// Durability is what Write and WriteAfter wait for before they count a
	// write as written (redis.wait_replicas); zero: the master's reply.
	Durability Durability
	// Wakes says which writes announce their shards, and to whom; zero:
	// none does.
	Wakes Wakes
}

// New returns a store over rdb.
func New(rdb redis.UniversalClient, opts Options) *Store {
	if opts.Wakes.Now == nil {
		opts.Wakes.Now = time.Now
	}
	return &Store{rdb: rdb, keys: opts.Keys, dur: opts.Durability, wakes: opts.Wakes}
}

// NewStore returns a store over rdb using keys, which waits for no replica
// and announces no write: what tests, tools and the read commands use.
func NewStore(rdb redis.UniversalClient, keys Keys) *Store {
	return New(rdb, Options{Keys: keys})
}

// Client is the underlying Redis client, for tests that set up or look at
// state no method reads. Everything else reads and writes through the
// store's methods, so this package alone knows how each key is kept.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Keys is the key builder.
func (s *Store) Keys() Keys { return s.keys }

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// LoadScripts loads every script into the script cache of Redis (every
// master, in a cluster), so pipelines can use EVALSHA.
func (s *Store) LoadScripts(ctx context.Context) error {
	load := func(ctx context.Context, c *redis.Client) error {
		for _, sc := range allScripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, load)
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load scripts: %w", err)
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// pipelined runs fill in a pipeline (see exec).
func (s *Store) pipelined(ctx context.Context, fill func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	p := s.rdb.Pipeline()
	if err := fill(p); err != nil {
		return nil, err
	}
	return s.exec(ctx, s.rdb, p, nil)
}

// exec runs the filled pipeline p of client c (the store's client, or in a
// cluster one master's), followed by what tail (nil: nothing) queues. When
// Redis lost its script cache (a restart or failover), it reloads the
// scripts and runs once more, on c, the calls that met NOSCRIPT, and tail
// after them. Only those: in a cluster the other masters' calls already
// ran, and running them again would lose what they reported (a recovery is
// reported by the call that ends it, once).
func (s *Store) exec(ctx context.Context, c redis.UniversalClient, p redis.Pipeliner, tail func(redis.Pipeliner)) ([]redis.Cmder, error) {
	if tail != nil {
		tail(p)
	}
	cmds, err := p.Exec(ctx)
	if !isNoScript(err) {
		return cmds, err
	}
	if lerr := s.LoadScripts(ctx); lerr != nil {
		return nil, lerr
	}
	again := c.Pipeline()
	for _, c := range cmds {
		if isNoScript(c.Err()) {
			_ = again.Process(ctx, c)
		}
	}
	if tail != nil {
		tail(again)
	}
	_, _ = again.Exec(ctx)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// readErr is the error of a pipeline of reads, where redis.Nil ("no such
// key or member") is an answer, not a failure. Pipelined reports only the
// first failed command, and a redis.Nil ahead of a command that failed (in a
// cluster: its master is down) would hide the failure.
func readErr(cmds []redis.Cmder, err error) error {
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			return cerr
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Member is a device in a shard's deadlines set with its score.
type Member struct {
	ID    string
	Score float64
}
