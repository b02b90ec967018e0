package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flatline-dev/flatline/app"
	"github.com/flatline-dev/flatline/configs"
	"github.com/flatline-dev/flatline/internal/logging"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/internal/schemareg"
	"github.com/flatline-dev/flatline/internal/simulate"
)

// DevOptions shape the `flatline dev` demo.
type DevOptions struct {
	Devices  int
	Interval time.Duration
	Timeout  time.Duration
	Silent   float64
	Duration time.Duration
	HTTPAddr string
	// Shape is how the simulated fleet writes its heartbeats, and so how
	// flatline reads them (the README's "Real sources"). Default: native.
	Shape simulate.Shape
	// Version labels flatline_build_info: cmd/flatline's main.version.
	Version string
}

// Validate checks the options; the error names the flags of `flatline dev`.
func (o DevOptions) Validate() error {
	if o.Devices < 1 || o.Interval <= 0 || o.Timeout < time.Second || o.Silent < 0 || o.Silent > 1 {
		return fmt.Errorf("dev: want --devices ≥ 1, --interval > 0, --timeout ≥ 1s and --silent within [0, 1]")
	}
	if !o.Shape.Valid() {
		return fmt.Errorf("dev: --shape: want one of %v, got %q", simulate.Shapes, o.Shape)
	}
	return nil
}

// RunDev runs the zero-setup demo: embedded Kafka, a Redis, one flatline
// instance and a simulated fleet, printing a live line per second to out.
func RunDev(ctx context.Context, o DevOptions, out, errOut io.Writer, logLevel string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	cfg := configs.Default()
	brokers, stopKafka, err := StartKafka(ctx, 8, cfg.Kafka.SignalsTopic, cfg.Kafka.TimeoutsTopic, cfg.Kafka.DeadLetterTopic)
	if err != nil {
		return fmt.Errorf("embedded kafka: %w", err)
	}
	defer stopKafka()
	redisAddr, kind, stopRedis, err := startRedis(ctx)
	if err != nil {
		return fmt.Errorf("redis for dev: %w", err)
	}
	defer stopRedis()

	devConfig(&cfg, o, brokers, redisAddr, logLevel)
	var avroEnc simulate.AvroEncoder
	if o.Shape == simulate.ShapeAvro {
		enc, stopRegistry, err := startRegistry(ctx, &cfg)
		if err != nil {
			return err
		}
		defer stopRegistry()
		avroEnc = enc
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := logging.New(cfg.Log, errOut)
	a, err := app.New(ctx, cfg, log, app.Hooks{})
	if err != nil {
		return err
	}
	if o.Version != "" {
		a.Metrics.SetVersion(o.Version)
	}
	fmt.Fprintf(out, "flatline dev: Kafka %v (embedded), Redis %s (%s)\n", brokers, redisAddr, kind)
	fmt.Fprintf(out, "  status page: http://%s/   (JSON: /status, Prometheus: /metrics)\n", a.HTTP.Addr())
	fmt.Fprintf(out, "  fleet: %d devices beating every %s, timeout %s, %.0f%% go silent over the first minute\n",
		o.Devices, o.Interval, o.Timeout, 100*o.Silent)
	if o.Shape != "" && o.Shape != simulate.ShapeNative {
		fmt.Fprintf(out, "  shape: %s, read with ingest.format %s, ingest.from %+v, ingest.payload %q\n",
			o.Shape, cfg.Ingest.Format, cfg.Ingest.From, cfg.Ingest.Payload)
		if o.Shape == simulate.ShapeAvro {
			fmt.Fprintf(out, "  schema registry: %s (in the process)\n", cfg.Ingest.SchemaRegistry.URL)
		}
	}
	fmt.Fprintln(out)

	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	simErr := make(chan error, 1)
	go func() {
		_, err := simulate.Run(ctx, cfg.Kafka, simulate.Config{
			Devices: o.Devices, Interval: o.Interval, Silent: o.Silent, SilentAfter: time.Minute, Prefix: "dev-",
			Shape: o.Shape, Avro: avroEnc,
		}, nil)
		simErr <- err
	}()
	return report(ctx, a, out, log, runErr, simErr)
}

// devConfig points cfg at the demo's Kafka and Redis and applies the
// options.
func devConfig(cfg *configs.Config, o DevOptions, brokers []string, redisAddr, logLevel string) {
	cfg.Kafka.Brokers = brokers
	cfg.Redis.Addrs = []string{redisAddr}
	cfg.Timeouts.Default = o.Timeout
	cfg.HTTP.Addr = freeAddr(o.HTTPAddr)
	shapeIngest(o.Shape, &cfg.Ingest)
	cfg.Log.Level = "warn"
	if logLevel != "" {
		cfg.Log.Level = logLevel
	}
}

// startRegistry starts a schema registry in the process, as the embedded
// Kafka, points ingest at it and returns the fleet's Avro encoder; stop
// closes the encoder's client and the registry.
func startRegistry(ctx context.Context, cfg *configs.Config) (enc simulate.AvroEncoder, stop func(), err error) {
	srv, err := schemareg.Start("127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("schema registry for dev: %w", err)
	}
	cfg.Ingest.SchemaRegistry.URL = srv.URL()
	enc, closeReg, err := AvroEncoder(ctx, cfg.Ingest.SchemaRegistry, cfg.Kafka.SignalsTopic)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return enc, func() { closeReg(); srv.Close() }, nil
}

// report prints a line a second to out until the instance stops (runErr),
// logging a simulator that fails.
func report(ctx context.Context, a *app.App, out io.Writer, log *slog.Logger, runErr, simErr chan error) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last snapshot
	start := time.Now()
	for {
		select {
		case err := <-runErr:
			return err
		case err := <-simErr:
			if err != nil && ctx.Err() == nil {
				log.Error("simulator stopped", "err", err)
			}
			simErr = nil
		case <-tick.C:
			if ctx.Err() != nil {
				continue // shutting down: Run returns shortly
			}
			cur := takeSnapshot(a.Metrics)
			tracked, _ := a.Store.Tracked(ctx, a.Watcher.Current().Shards()) // 0 when Redis does not answer
			fmt.Fprintf(out, "%6s  tracked %7d  resets/s %7.0f  timeouts/s %5.0f  (total %d)  lateness p99 %s\n",
				time.Since(start).Truncate(time.Second), tracked,
				cur.resets-last.resets, cur.timeouts-last.timeouts, int64(cur.timeouts), p99(last.buckets, cur.buckets))
			last = cur
		}
	}
}

// freeAddr returns addr if it can be bound, else a free loopback port.
func freeAddr(addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		_ = ln.Close()
		return addr
	}
	return "127.0.0.1:0"
}

type snapshot struct {
	resets, timeouts float64
	buckets          []*dto.Bucket
}

func takeSnapshot(m *metrics.Metrics) snapshot {
	var s snapshot
	var pb dto.Metric
	if m.HeartbeatsConsumed.Write(&pb) == nil {
		s.resets = pb.GetCounter().GetValue()
	}
	pb.Reset()
	if m.TimeoutsPublished.Write(&pb) == nil {
		s.timeouts = pb.GetCounter().GetValue()
	}
	pb.Reset()
	if m.Lateness.Write(&pb) == nil {
		s.buckets = pb.GetHistogram().GetBucket()
	}
	return s
}

// p99 estimates the 99th percentile of the observations between two
// snapshots of the lateness histogram, as the upper bound of its bucket.
func p99(before, after []*dto.Bucket) string {
	n := len(after)
	if n == 0 {
		return "-"
	}
	counts := make([]uint64, n)
	for i, b := range after {
		counts[i] = b.GetCumulativeCount()
		if i < len(before) {
			counts[i] -= before[i].GetCumulativeCount()
		}
	}
	total := counts[n-1]
	if total == 0 {
		return "-"
	}
	want := uint64(float64(total)*0.99 + 0.5)
	k := sort.Search(n, func(i int) bool { return counts[i] >= want })
	if k >= n {
		return "> 10s"
	}
	return "≤ " + time.Duration(after[k].GetUpperBound()*float64(time.Second)).String()
}
