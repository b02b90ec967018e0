// Package app assembles `flatline serve`: it connects to Redis and Kafka,
// builds every stage from the configuration and runs them under one
// lifecycle.
//
// Start order: HTTP, layout watcher, watermark gate, scanners with their
// leaser, ingest.
//
// Stop order, on SIGINT/SIGTERM (ctx cancelled), all within
// shutdown_timeout:
//  1. ingest stops fetching; a batch already written is committed, one cut
//     short is re-read by the partition's next owner (never lost);
//  2. scanners start no new pass; in-flight batches are acknowledged by
//     Kafka and removed from their shards;
//  3. leases are released and the instance deregisters, so other instances
//     take its shards at once;
//  4. the producers flush and close;
//  5. the layout watcher, the gate and HTTP stop.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/dispatch"
	"github.com/flatline-dev/flatline/ingest"
	"github.com/flatline-dev/flatline/internal/httpapi"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/redisconn"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/timeouts"
)

// Hooks let tests reach into a running instance.
type Hooks struct {
	Scanner scanner.Hooks
	Ingest  ingest.Hooks
	// MinDownMemory shortens how long fired devices are remembered as down
	// (default scanner.DefaultMinDownMemory), so tests can watch pruning.
	MinDownMemory time.Duration
}

// App is one flatline instance.
type App struct {
	cfg     configs.Config
	log     *slog.Logger
	id      string
	Metrics *metrics.Metrics

	rdb       redis.UniversalClient
	Store     *shard.Store
	Watcher   *rebalance.Watcher
	Gate      *scanner.Gate
	Publisher *dispatch.Publisher
	Scanner   *scanner.Scanner
	Leaser    *scanner.Leaser
	Sweeper   *rebalance.Sweeper
	Ingest    *ingest.Ingest
	HTTP      *httpapi.Server
}

// InstanceID returns the configured id or hostname-pid-random.
func InstanceID(cfg configs.Config) string {
	if cfg.InstanceID != "" {
		return cfg.InstanceID
	}
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
}

// Connect opens the Redis client, checks it answers and loads the scripts.
func Connect(ctx context.Context, rc redisconn.Config) (redis.UniversalClient, *shard.Store, error) {
	rdb, err := redisconn.New(rc)
	if err != nil {
		return nil, nil, err
	}
	store := shard.NewStore(rdb, shard.NewKeys(rc.KeyPrefix))
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.Ping(pctx); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis %v: %w", rc.Addrs, err)
	}
	if err := store.LoadScripts(pctx); err != nil {
		_ = rdb.Close()
		return nil, nil, fmt.Errorf("redis %v: %w", rc.Addrs, err)
	}
	return rdb, store, nil
}

// LoadPolicy registers the configured classes and returns the policy.
func LoadPolicy(ctx context.Context, store *shard.Store, tc timeouts.Config) (*timeouts.Policy, error) {
	names := tc.ClassNames()
	if _, err := store.RegisterClasses(ctx, names); err != nil {
		return nil, err
	}
	reg, err := store.ClassNames(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]int, len(reg))
	for id, name := range reg {
		ids[name] = id
	}
	return timeouts.NewPolicy(tc, ids), nil
}

// New builds an instance: it fails fast, with one clear error, when Redis or
// Kafka cannot be reached or the HTTP address cannot be bound.
func New(ctx context.Context, cfg configs.Config, log *slog.Logger, hooks Hooks) (*App, error) {
	a := &App{cfg: cfg, log: log, id: InstanceID(cfg), Metrics: metrics.New()}
	log = log.With("instance", a.id)
	a.log = log
	var err error
	if a.rdb, a.Store, err = Connect(ctx, cfg.Redis); err != nil {
		return nil, err
	}
	if err := checkKafka(ctx, cfg); err != nil {
		a.Close()
		return nil, err
	}
	policy, err := LoadPolicy(ctx, a.Store, cfg.Timeouts)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Watcher = rebalance.NewWatcher(a.Store, cfg.Shards, log)
	a.Watcher.Announce(a.id)
	if _, err := a.Watcher.Init(ctx, cfg.Shards.InitialCount); err != nil {
		a.Close()
		return nil, err
	}
	a.Publisher, err = dispatch.New(cfg.Dispatch, cfg.Kafka, dispatch.Options{
		Policy: policy, PadWindow: cfg.Ingest.CoalesceWindow, Metrics: a.Metrics, Logger: log,
	})
	if err != nil {
		a.Close()
		return nil, err
	}
	if a.runs("scanner") {
		a.Gate = scanner.NewGate(a.Store, 5*time.Millisecond, cfg.Scanner.Grace, stallAfter(cfg), log)
		a.Scanner, err = scanner.New(cfg.Scanner, scanner.Options{
			Store: a.Store, Dispatcher: a.Publisher, Gate: a.Gate, Layout: a.Watcher, Metrics: a.Metrics, Log: log,
			RecoveryWindow: cfg.Dispatch.RecoveryWindow, MinDownMemory: hooks.MinDownMemory,
			DrainTimeout: cfg.ShutdownTimeout, Hooks: hooks.Scanner,
		})
		if err != nil {
			a.Close()
			return nil, err
		}
		a.Leaser = scanner.NewLeaser(a.Store, a.id, cfg.Scanner.LeaseTTL, a.Watcher, a.Scanner.SetShards, a.Metrics, log)
		a.Leaser.Drain = a.Scanner.Drain
		// The owner of shard 0's scanner sweeps migrations: one sweeper at a time.
		a.Sweeper = rebalance.NewSweeper(a.Store, a.Watcher, func() bool { return a.Leaser.Owns(0) }, a.Metrics, log)
	}
	if a.runs("ingest") {
		var rec ingest.RecoveryPublisher
		if cfg.Dispatch.RecoveryWindow > 0 {
			rec = a.Publisher
		}
		var raised func(map[int]int64)
		if a.Gate != nil {
			raised = a.Gate.Raised // this process's scanners see its writes at once
		}
		a.Ingest, err = ingest.New(cfg.Ingest, ingest.Options{
			Store: a.Store, Layout: a.Watcher, Policy: policy, Kafka: cfg.Kafka,
			Metrics: a.Metrics, Log: log, Recovery: rec, RecoveryWindow: cfg.Dispatch.RecoveryWindow,
			Raised: raised, Hooks: hooks.Ingest,
		})
		if err != nil {
			a.Close()
			return nil, err
		}
	}
	if cfg.HTTP.Addr != "" {
		a.HTTP, err = httpapi.New(cfg.HTTP, httpapi.Options{
			Registry: a.Metrics.Registry, Ready: a.ready, Status: a.status, Log: log,
			Collect: a.collectCluster,
		})
		if err != nil {
			a.Close()
			return nil, err
		}
	}
	return a, nil
}

// stallAfter is how far behind now the watermark may fall before it is
// reported as stalled: well past normal batching and probing delays.
func stallAfter(cfg configs.Config) time.Duration {
	d := 10 * cfg.Ingest.ProbeInterval
	if d < 2*time.Second {
		d = 2 * time.Second
	}
	return d
}

func (a *App) runs(role string) bool { return slices.Contains(a.cfg.Roles, role) }

// ID is the instance id.
func (a *App) ID() string { return a.id }

func checkKafka(ctx context.Context, cfg configs.Config) error {
	tr, err := cfg.Kafka.Transport()
	if err != nil {
		return err
	}
	client := &kafka.Client{Addr: kafka.TCP(cfg.Kafka.Brokers...), Transport: tr, Timeout: 5 * time.Second}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.Metadata(cctx, &kafka.MetadataRequest{Topics: []string{cfg.Kafka.SignalsTopic, cfg.Kafka.TimeoutsTopic}}); err != nil {
		return fmt.Errorf("kafka %v: %s", cfg.Kafka.Brokers, strings.TrimPrefix(err.Error(), "kafka.(*Client).Metadata: "))
	}
	return nil
}

func (a *App) ready(ctx context.Context) error {
	if err := a.Store.Ping(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if a.Watcher.Current().Count == 0 {
		return errors.New("layout not loaded")
	}
	return checkKafka(ctx, a.cfg)
}

func (a *App) status(ctx context.Context) (any, error) {
	st, err := rebalance.ReadStatus(ctx, a.Store, time.Now())
	if err != nil {
		return nil, err
	}
	st.Instance = a.id
	return st, nil
}

// Run runs the instance until ctx is cancelled or a part fails, then stops
// it in the documented order.
func (a *App) Run(ctx context.Context) error {
	infraCtx, stopInfra := context.WithCancel(context.Background())
	leaseCtx, stopLeases := context.WithCancel(context.Background())
	scanCtx, stopScan := context.WithCancel(context.Background())
	ingestCtx, stopIngest := context.WithCancel(context.Background())
	defer stopInfra()
	defer stopLeases()
	defer stopScan()
	defer stopIngest()

	failed := make(chan error, 8)
	var infra, leases, scan, ing sync.WaitGroup
	start := func(wg *sync.WaitGroup, name string, ctx context.Context, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				failed <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if a.HTTP != nil {
		start(&infra, "http", infraCtx, a.HTTP.Run)
		a.log.Info("http listening", "addr", a.HTTP.Addr())
	}
	start(&infra, "layout", infraCtx, a.Watcher.Run)
	if a.Scanner != nil {
		start(&infra, "watermark", infraCtx, a.Gate.Run)
		start(&scan, "scanner", scanCtx, a.Scanner.Run)
		start(&leases, "leaser", leaseCtx, a.Leaser.Run)
		start(&infra, "sweeper", infraCtx, a.Sweeper.Run)
	}
	if a.Ingest != nil {
		start(&ing, "ingest", ingestCtx, a.Ingest.Run)
	}
	a.log.Info("flatline running", "roles", a.cfg.Roles, "shards", a.Watcher.Current().Count)

	var runErr error
	select {
	case <-ctx.Done():
		a.log.Info("shutting down")
	case runErr = <-failed:
		a.log.Error("stopping after failure", "err", runErr)
	}
	stopIngest()
	ing.Wait()
	stopScan()
	scan.Wait() // the scanner's Run drains its in-flight batches before it returns
	stopLeases()
	leases.Wait()
	if a.Ingest != nil {
		_ = a.Ingest.Close()
	}
	if err := a.Publisher.Close(); err != nil {
		a.log.Warn("producer close", "err", err)
	}
	stopInfra()
	infra.Wait()
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
	a.log.Info("stopped")
	return runErr
}

// Close releases the clients (Run calls it).
func (a *App) Close() {
	if a.Ingest != nil {
		_ = a.Ingest.Close()
	}
	if a.Publisher != nil {
		_ = a.Publisher.Close()
	}
	if a.rdb != nil {
		_ = a.rdb.Close()
	}
}
