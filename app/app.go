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
	"github.com/flatline-dev/flatline/maintenance"
	"github.com/flatline-dev/flatline/rebalance"
	"github.com/flatline-dev/flatline/scanner"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm/namer"
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
	// (by default 10 minutes), so tests can watch pruning.
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
	publisher *dispatch.Publisher
	scanner   *scanner.Scanner
	Leaser    *scanner.Leaser
	wakes     *scanner.Wakes
	sweeper   *rebalance.Sweeper
	namer     *namer.Namer
	// maint is the instance's view of the maintenance windows: loaded in
	// build, before any scanner runs, so nothing a window holds fires at
	// start.
	maint  *maintenance.Room
	Ingest *ingest.Ingest
	HTTP   *httpapi.Server
}

// instanceID returns the configured id or hostname-pid-random.
func instanceID(cfg configs.Config) string {
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
	a := &App{cfg: cfg, id: instanceID(cfg)}
	// /metrics reads the deployment's state at scrape time through the
	// store and the policy built below; nothing gathers it before build
	// has bound the HTTP server.
	a.Metrics = metrics.New(metrics.Options{Cluster: a.readCluster})
	a.log = log.With("instance", a.id)
	// A write of a deadline due before the scanners' next poll wakes the
	// shard's scanner: this process's at once, another instance's through
	// Redis. Everything reads and writes through the store, so it is built
	// first, and its arrow to the wake-ups goes to a.wakes, built once
	// the scanners it wakes are (build).
	opts := storeOptions(cfg.Redis)
	opts.Wakes = shard.Wakes{Within: cfg.Scanner.WakeWithin(), Announce: func(shards []int) { a.wakes.Announce(shards) }}
	var err error
	if a.rdb, a.Store, err = connect(ctx, cfg.Redis, opts, true); err != nil {
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
// the layout, the gate and the producers, then what the roles ask for, HTTP
// last (so a failure before it leaves no listener behind). Every callback
// one part makes into another is an Options field set here.
func (a *App) build(ctx context.Context, hooks Hooks) error {
	cfg := a.cfg
	if err := a.connectKafka(ctx); err != nil {
		return err
	}
	if err := a.buildLayout(ctx); err != nil {
		return err
	}
	a.maint = maintenance.New(maintenance.Options{Store: a.Store, Log: a.log,
		Shards: func() int { return a.Watcher.Current().Shards() }})
	if err := a.maint.Load(ctx); err != nil {
		return err
	}
	if cfg.HasRole(configs.RoleScanner) {
		a.Gate = scanner.NewGate(scanner.GateOptions{Store: a.Store, Poll: gatePoll, IdlePoll: gateIdlePoll,
			Grace: cfg.Scanner.Grace, StallAfter: stallAfter(cfg), Log: a.log})
	}
	// The storm guard's tally: dispatch counts into it what Kafka
	// acknowledged, and asks it the storm_id of the timeouts.
	tally := namer.NewTally(namer.TallyOptions{Store: a.Store, GateStormID: a.gateStormID()})
	var err error
	a.publisher, err = dispatch.New(cfg.Dispatch, cfg.Kafka, dispatch.Options{
		Policy: a.policy, PadWindow: cfg.Ingest.CoalesceWindow, Metrics: a.Metrics, Logger: a.log,
		StormID: tally.StormID, Published: tally.Published,
	})
	if err != nil {
		return err
	}
	var leader func() bool // nil: this process runs no scanners, it only counts
	if cfg.HasRole(configs.RoleScanner) {
		if err := a.buildScanners(hooks); err != nil {
			return err
		}
		leader = a.leads
	}
	a.namer = namer.New(cfg.Storm, namer.Options{
		Store: a.Store, Tally: tally, MinTimeout: cfg.Timeouts.Min, Leader: leader,
		Announce: a.publisher.StormEvent, Tracked: a.tracked, Metrics: a.Metrics, Log: a.log,
	})
	// What the store announces (New) goes to this process's scanners, and
	// to the other instances' through Redis.
	a.wakes = scanner.NewWakes(scanner.WakesOptions{Store: a.Store, Scanner: a.scanner, Log: a.log})
	if cfg.HasRole(configs.RoleIngest) {
		if err := a.buildIngest(hooks); err != nil {
			return err
		}
	}
	return a.buildHTTP()
}

// connectKafka creates the instance's Kafka client and checks the brokers.
func (a *App) connectKafka(ctx context.Context) error {
	var err error
	if a.kafka, err = kafkaClient(a.cfg); err != nil {
		return err
	}
	return checkKafkaAtStart(ctx, a.kafka, a.cfg, a.log)
}

// buildLayout registers the classes and loads the layout, storing the
// initial one on a fresh deployment.
func (a *App) buildLayout(ctx context.Context) error {
	var err error
	if a.policy, err = loadPolicy(ctx, a.Store, a.cfg.Timeouts); err != nil {
		return err
	}
	a.Watcher = rebalance.NewWatcher(rebalance.WatcherOptions{Store: a.Store, Config: a.cfg.Shards, Instance: a.id, Log: a.log})
	_, err = a.Watcher.Init(ctx, a.cfg.Shards.InitialCount)
	return err
}

// buildScanners creates the scanners, the leaser that chooses their shards
// and the migration sweeper.
func (a *App) buildScanners(hooks Hooks) error {
	cfg := a.cfg
	var err error
	a.scanner, err = scanner.New(cfg.Scanner, scanner.Options{
		Store: a.Store, Dispatcher: a.publisher, Gate: a.Gate, Layout: a.Watcher, Metrics: a.Metrics, Log: a.log,
		RecoveryWindow: cfg.Dispatch.RecoveryWindow, MinDownMemory: hooks.MinDownMemory,
		DrainTimeout: drainTimeout(cfg.ShutdownTimeout), Timing: a.publisher.Timing, Hooks: hooks.Scanner,
		Maintenance: a.maint, ClassOf: a.publisher.ClassOf, Gateways: &cfg.Gateways,
	})
	if err != nil {
		return err
	}
	a.Leaser = scanner.NewLeaser(scanner.LeaserOptions{
		Store: a.Store, Instance: a.id, TTL: cfg.Scanner.LeaseTTL, Layout: a.Watcher,
		Apply: a.scanner.SetShards, Drain: a.scanner.Drain, Metrics: a.Metrics, Log: a.log,
	})
	a.sweeper = rebalance.NewSweeper(rebalance.SweeperOptions{
		Store: a.Store, Watcher: a.Watcher, Leader: a.leads, Metrics: a.Metrics, Log: a.log,
	})
	return nil
}

// buildIngest creates ingest: its batches' watermarks go to this process's
// gate at once, its recoveries to the producer.
func (a *App) buildIngest(hooks Hooks) error {
	cfg := a.cfg
	var rec ingest.RecoveryPublisher
	if cfg.Dispatch.RecoveryWindow > 0 {
		rec = a.publisher
	}
	var raised func(map[int]int64)
	if a.Gate != nil {
		raised = a.Gate.Raised // this process's scanners see its writes at once
	}
	var err error
	a.Ingest, err = ingest.New(cfg.Ingest, ingest.Options{
		Store: a.Store, Layout: a.Watcher, Policy: a.policy, Kafka: cfg.Kafka,
		Metrics: a.Metrics, Log: a.log, Recovery: rec, RecoveryWindow: cfg.Dispatch.RecoveryWindow,
		Raised: raised, Storm: cfg.Storm, Hooks: hooks.Ingest,
	})
	return err
}

// buildHTTP binds the HTTP server, when an address is configured.
func (a *App) buildHTTP() error {
	if a.cfg.HTTP.Addr == "" {
		return nil
	}
	var err error
	a.HTTP, err = httpapi.New(a.cfg.HTTP, httpapi.Options{
		Registry: a.Metrics.Registry, Ready: a.ready, Status: a.status, Log: a.log,
		DevicesDown: a.devicesDown,
	})
	return err
}

// leads reports whether this instance does the work one instance does at a
// time (sweeping migrations, naming storms): the owner of shard 0's lease.
func (a *App) leads() bool { return a.Leaser.Owns(0) }

// gateStormID is this process's gate's view of the storm being named, nil
// without scanners.
func (a *App) gateStormID() func() string {
	if a.Gate == nil {
		return nil
	}
	return a.Gate.StormID
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
