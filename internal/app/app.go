package app

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"time"

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
	"github.com/flatline-dev/flatline/storm"
	"github.com/flatline-dev/flatline/timeouts"
)

// The firing gate reads the shared watermarks hash every gatePoll while one
// of this instance's deadlines waits for the watermark, every gateIdlePoll
// otherwise: an instance with nothing due costs Redis ten reads a second
// instead of two hundred, and a pass still fires on a read at most two
// gatePolls old (scanner.NewGate).
const (
	gatePoll     = 5 * time.Millisecond
	gateIdlePoll = 100 * time.Millisecond
)

// Hooks let tests reach into a running instance.
type Hooks struct {
	Scanner scanner.Hooks
	Ingest  ingest.Hooks
	// MinDownMemory shortens how long fired devices are remembered as down
	// (default scanner.DefaultMinDownMemory), so tests can watch pruning.
	MinDownMemory time.Duration
}

// App is one flatline instance. The stages the roles leave out are nil.
type App struct {
	cfg     configs.Config
	log     *slog.Logger
	id      string
	Metrics *metrics.Metrics
	// policy names the classes in scores (the registry as of start-up).
	policy *timeouts.Policy

	// rdb is the client under Store, held to be closed in the stop order
	// and to describe the deployment (redisconn.ReadStatus); every read
	// and write of flatline's keys goes through Store.
	rdb redisconn.Client
	// kafka asks the brokers the instance's own questions (start-up
	// checks, /readyz): one client for the life of the process.
	kafka     *kafka.Client
	Store     *shard.Store
	Watcher   *rebalance.Watcher
	Gate      *scanner.Gate
	Publisher *dispatch.Publisher
	Scanner   *scanner.Scanner
	Leaser    *scanner.Leaser
	Wakes     *scanner.Wakes
	Sweeper   *rebalance.Sweeper
	Namer     *storm.Namer
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

// ID is the instance id.
func (a *App) ID() string { return a.id }

// New builds an instance: it fails fast, with one clear error, when Redis or
// Kafka cannot be reached or the HTTP address cannot be bound. What it built
// before failing is closed again.
func New(ctx context.Context, cfg configs.Config, log *slog.Logger, hooks Hooks) (*App, error) {
	a := &App{cfg: cfg, id: InstanceID(cfg), Metrics: metrics.New()}
	a.log = log.With("instance", a.id)
	var err error
	if a.rdb, a.Store, err = Connect(ctx, cfg.Redis); err != nil {
		return nil, err
	}
	if err := checkRedisAtStart(ctx, a.rdb, cfg.Redis, a.log); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.build(ctx, hooks); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// build creates the stages on top of the Redis store, in dependency order:
// the layout, the producers, then what the roles ask for, HTTP last (so a
// failure before it leaves no listener behind).
func (a *App) build(ctx context.Context, hooks Hooks) error {
	cfg, log := a.cfg, a.log
	var err error
	if a.kafka, err = kafkaClient(cfg); err != nil {
		return err
	}
	if err := checkKafkaAtStart(ctx, a.kafka, cfg, log); err != nil {
		return err
	}
	policy, err := LoadPolicy(ctx, a.Store, cfg.Timeouts)
	if err != nil {
		return err
	}
	a.policy = policy
	a.Watcher = rebalance.NewWatcher(a.Store, cfg.Shards, log)
	a.Watcher.Announce(a.id)
	if _, err := a.Watcher.Init(ctx, cfg.Shards.InitialCount); err != nil {
		return err
	}
	a.Publisher, err = dispatch.New(cfg.Dispatch, cfg.Kafka, dispatch.Options{
		Policy: policy, PadWindow: cfg.Ingest.CoalesceWindow, Metrics: a.Metrics, Logger: log,
	})
	if err != nil {
		return err
	}
	namer := storm.NamerOptions{
		Store: a.Store, MinTimeout: cfg.Timeouts.Min, Announcer: a.Publisher, Tracked: a.tracked, Metrics: a.Metrics, Log: log,
	}
	if cfg.HasRole(configs.RoleScanner) {
		a.Gate = scanner.NewGate(a.Store, gatePoll, gateIdlePoll, cfg.Scanner.Grace, stallAfter(cfg), log)
		namer.Gate = a.Gate
		namer.Leader = func() bool { return a.Leaser.Owns(0) }
		a.Scanner, err = scanner.New(cfg.Scanner, scanner.Options{
			Store: a.Store, Dispatcher: a.Publisher, Gate: a.Gate, Layout: a.Watcher, Metrics: a.Metrics, Log: log,
			RecoveryWindow: cfg.Dispatch.RecoveryWindow, MinDownMemory: hooks.MinDownMemory,
			DrainTimeout: drainTimeout(cfg.ShutdownTimeout), Timing: a.Publisher.Timing, Hooks: hooks.Scanner,
		})
		if err != nil {
			return err
		}
		a.Leaser = scanner.NewLeaser(a.Store, a.id, cfg.Scanner.LeaseTTL, a.Watcher, a.Scanner.SetShards, a.Metrics, log)
		a.Leaser.Drain = a.Scanner.Drain
		// The owner of shard 0's scanner sweeps migrations: one sweeper at a time.
		a.Sweeper = rebalance.NewSweeper(a.Store, a.Watcher, func() bool { return a.Leaser.Owns(0) }, a.Metrics, log)
	}
	a.Namer = storm.NewNamer(cfg.Storm, namer)
	a.Publisher.SetStorm(a.Namer)
	// A write of a deadline due before the scanners' next poll wakes the
	// shard's scanner: this process's at once, another instance's through
	// Redis.
	a.Wakes = scanner.NewWakes(a.Store, a.Scanner, log)
	a.Store.SetWakes(shard.Wakes{Within: cfg.Scanner.WakeWithin(), Announce: a.Wakes.Announce})
	if cfg.HasRole(configs.RoleIngest) {
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
			Raised: raised, Storm: cfg.Storm, Hooks: hooks.Ingest,
		})
		if err != nil {
			return err
		}
	}
	a.Metrics.SetClusterReader(a.readCluster)
	if cfg.HTTP.Addr != "" {
		a.HTTP, err = httpapi.New(cfg.HTTP, httpapi.Options{
			Registry: a.Metrics.Registry, Ready: a.ready, Status: a.status, Log: log,
			DevicesDown: a.devicesDown,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// drainTimeout is how long the scanners' batches in flight may take to be
// acknowledged on shutdown: most of shutdown_timeout, leaving the stages
// after them (leases, producers, the rest) time to stop within it.
func drainTimeout(shutdown time.Duration) time.Duration {
	return max(shutdown/2, shutdown-2*time.Second)
}

// stallAfter is how far behind now the watermark may fall before it is
// reported as stalled: well past normal batching and probing delays.
func stallAfter(cfg configs.Config) time.Duration {
	return max(10*cfg.Ingest.ProbeInterval, 2*time.Second)
}

// tracked is the number of devices tracked: the storm threshold's base.
func (a *App) tracked(ctx context.Context) (int64, error) {
	return a.Store.Tracked(ctx, a.Watcher.Current().Shards())
}
