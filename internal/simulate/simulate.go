// Package simulate is a fleet of fake devices for `flatline simulate` and
// `flatline dev`: it writes JSON heartbeats to the signals topic, each
// device beating once per interval at its own phase, and makes a chosen
// fraction of the fleet go silent so that timeouts happen.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
)

// Config describes the simulated fleet.
type Config struct {
	// Devices is the fleet size. Default: 1000.
	Devices int
	// Interval is how often each device beats. Default: 5s.
	Interval time.Duration
	// Silent is the fraction of devices, in [0, 1], that stop beating.
	// Default: 0.01.
	Silent float64
	// SilentAfter is the window after the start within which the silent
	// devices stop, each at its own random moment. Every device beats at
	// least once first, so it is tracked before it goes silent. Default: 30s.
	SilentAfter time.Duration
	// Rate caps the heartbeats per second; when the fleet would beat faster,
	// every device beats less often instead. 0 means Devices/Interval.
	Rate float64
	// Duration stops the run; 0 runs until the context is done.
	Duration time.Duration
	// Prefix starts every device id; the rest is the zero-padded device
	// number. Default: "sim-".
	Prefix string
	// Class and TimeoutMs, when set, are sent in every heartbeat.
	Class     string
	TimeoutMs int64
	// Shape is how heartbeats are written. Default: native.
	Shape Shape
	// Avro encodes heartbeats for the shape avro.
	Avro AvroEncoder
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Devices: 1000, Interval: 5 * time.Second, Silent: 0.01, SilentAfter: 30 * time.Second, Prefix: "sim-"}
}

// Validate checks the configuration; errors name the offending setting.
func (c Config) Validate() error {
	switch {
	case c.Devices < 1:
		return fmt.Errorf("devices: must be at least 1, got %d", c.Devices)
	case c.Interval <= 0:
		return fmt.Errorf("interval: must be positive, got %s", c.Interval)
	case !(c.Silent >= 0 && c.Silent <= 1):
		return fmt.Errorf("silent: must be a fraction within [0, 1], got %v", c.Silent)
	case c.SilentAfter < 0:
		return fmt.Errorf("silent-after: must not be negative, got %s", c.SilentAfter)
	case !(c.Rate >= 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("rate: must be a non-negative number of messages per second, got %v", c.Rate)
	case c.Duration < 0:
		return fmt.Errorf("duration: must not be negative, got %s", c.Duration)
	case c.TimeoutMs < 0:
		return fmt.Errorf("timeout-ms: must not be negative, got %d", c.TimeoutMs)
	case len(c.Prefix)+len(strconv.Itoa(c.Devices-1)) > 256:
		return fmt.Errorf("prefix: device ids would exceed 256 bytes")
	case !c.Shape.Valid():
		return fmt.Errorf("shape: want one of %v, got %q", Shapes, c.Shape)
	case c.Shape == ShapeAvro && c.Avro == nil:
		return fmt.Errorf("shape: avro needs a schema registry (ingest.schema_registry.url)")
	}
	return nil
}

// Stats is the progress of a run.
type Stats struct {
	// Sent counts heartbeats Kafka acknowledged.
	Sent int64
	// Errors counts heartbeats that failed to be written (not retried).
	Errors int64
	// Silenced lists the devices that went silent, in the order their
	// silence was noticed (their first skipped beat).
	Silenced []Silenced
	// Elapsed is the time since the start.
	Elapsed time.Duration
}

// Silenced is a device that stopped beating.
type Silenced struct {
	ID string
	// LastBeat is the time (and the ts) of its last heartbeat: it should
	// time out at LastBeat + its timeout.
	LastBeat time.Time
}

const (
	// tick is how often the generator catches up with the schedule.
	tick = 10 * time.Millisecond
	// chunkMax caps the heartbeats of one WriteMessages call.
	chunkMax = 8192
	// batchSize caps one produce request per partition. kafka-go
	// preallocates every batch at this capacity, so it stays modest.
	batchSize = 2048
)

// Run sends the fleet's heartbeats to k.SignalsTopic until cfg.Duration has
// passed or ctx is done, calling progress (if not nil) about once a second
// from Run's goroutine. It returns the final Stats; the end of ctx is a
// normal end, not an error. Progress snapshots share Silenced with later
// snapshots; do not modify it.
func Run(ctx context.Context, k kafkaconn.Config, cfg Config, progress func(Stats)) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	if len(k.Brokers) == 0 || k.SignalsTopic == "" {
		return Stats{}, errors.New("simulate: kafka brokers and signals topic are required")
	}
	tr, err := k.Transport()
	if err != nil {
		return Stats{}, err
	}
	defer tr.CloseIdleConnections()
	if err := checkTopic(ctx, tr, k); err != nil {
		return Stats{}, err
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(k.Brokers...),
		Topic:        k.SignalsTopic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireOne,
		// Each call hands over all its messages at once, so there is
		// nothing to linger for; 0 would mean kafka-go's 1s default.
		BatchTimeout: time.Nanosecond,
		BatchSize:    batchSize,
		MaxAttempts:  3,
		Transport:    tr,
	}
	g := &generator{cfg: cfg, w: w, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	stats, runErr := g.run(ctx, progress)
	if err := w.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("simulate: close writer: %w", err)
	}
	return stats, runErr
}

func checkTopic(ctx context.Context, tr *kafka.Transport, k kafkaconn.Config) error {
	c := &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: tr, Timeout: 10 * time.Second}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{k.SignalsTopic}})
	if err != nil {
		return fmt.Errorf("simulate: kafka metadata: %w", err)
	}
	for _, t := range md.Topics {
		if t.Name == k.SignalsTopic {
			if t.Error != nil {
				return fmt.Errorf("simulate: topic %s: %w", k.SignalsTopic, t.Error)
			}
			return nil
		}
	}
	return fmt.Errorf("simulate: topic %s does not exist", k.SignalsTopic)
}

// slotRate is heartbeats per second: the fleet's natural rate, capped.
func (c Config) slotRate() float64 {
	r := float64(c.Devices) / c.Interval.Seconds()
	if c.Rate > 0 && c.Rate < r {
		r = c.Rate
	}
	return r
}

type generator struct {
	cfg   Config
	w     *kafka.Writer
	rng   *rand.Rand
	fleet *fleet

	buf   []byte
	ends  []int
	msgs  []kafka.Message
	stats Stats
}

// run is the schedule: slot s (s = 0, 1, 2, …) is due at s/slotRate after the
// start and belongs to device s mod Devices, so every device beats once per
// Devices/slotRate (= Interval unless Rate caps it), at its own phase, and
// the fleet's beats are spread evenly. Each tick sends every slot that has
// come due; a slow write is caught up by the next, larger one.
func (g *generator) run(ctx context.Context, progress func(Stats)) (Stats, error) {
	rate := g.cfg.slotRate()
	start := time.Now()
	g.fleet = newFleet(g.cfg, g.rng, start)
	nextProgress := start.Add(time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var slot int64
	for {
		now := time.Now()
		elapsed := now.Sub(start)
		final := g.cfg.Duration > 0 && elapsed >= g.cfg.Duration
		if final {
			elapsed = g.cfg.Duration
		}
		due := int64(elapsed.Seconds() * rate)
		for slot < due && ctx.Err() == nil {
			n := min(due-slot, chunkMax)
			g.send(ctx, slot, n)
			slot += n
		}
		g.stats.Elapsed = time.Since(start)
		if progress != nil && !time.Now().Before(nextProgress) {
			progress(g.snapshot())
			nextProgress = nextProgress.Add(time.Second)
		}
		if final || ctx.Err() != nil {
			return g.snapshot(), nil
		}
		select {
		case <-ctx.Done():
			g.stats.Elapsed = time.Since(start)
			return g.snapshot(), nil
		case <-t.C:
		}
	}
}

func (g *generator) snapshot() Stats {
	s := g.stats
	s.Silenced = s.Silenced[:len(s.Silenced):len(s.Silenced)]
	return s
}

// send writes the heartbeats of slots [first, first+n).
func (g *generator) send(ctx context.Context, first, n int64) {
	now := time.Now()
	nowMs := now.UnixMilli()
	g.buf, g.ends = g.buf[:0], g.ends[:0]
	clear(g.msgs)
	g.msgs = g.msgs[:0]
	devices := int64(g.cfg.Devices)
	for s := first; s < first+n; s++ {
		dev := int(s % devices)
		if !g.fleet.beats(dev, now, &g.stats) {
			continue
		}
		if g.cfg.Shape != "" && g.cfg.Shape != ShapeNative {
			g.shaped(dev, now)
			continue
		}
		g.buf = g.fleet.appendID(g.buf, dev)
		keyEnd := len(g.buf)
		g.buf = g.fleet.appendHeartbeat(g.buf, dev, nowMs)
		g.ends = append(g.ends, keyEnd, len(g.buf))
	}
	if len(g.ends) == 0 && len(g.msgs) == 0 {
		return
	}
	start := 0
	for i := 0; i < len(g.ends); i += 2 {
		k, v := g.ends[i], g.ends[i+1]
		g.msgs = append(g.msgs, kafka.Message{Key: g.buf[start:k:k], Value: g.buf[k:v:v], Time: now})
		start = v
	}
	err := g.w.WriteMessages(ctx, g.msgs...)
	var werrs kafka.WriteErrors
	switch {
	case err == nil:
		g.stats.Sent += int64(len(g.msgs))
	case errors.As(err, &werrs):
		failed := int64(werrs.Count())
		g.stats.Errors += failed
		g.stats.Sent += int64(len(g.msgs)) - failed
	case ctx.Err() != nil:
		// WriteMessages stopped waiting, but kafka-go may still be sending
		// these messages (neither sent nor failed as far as we know), so
		// their bytes must not be reused.
		g.buf, g.msgs = nil, nil
	default:
		// A broker or metadata failure: nothing was sent; don't spin on it.
		g.stats.Errors += int64(len(g.msgs))
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// shaped appends the heartbeat of device dev in the configured shape (not
// native: that one is written without allocating, in send); one that
// cannot be written counts as an error.
func (g *generator) shaped(dev int, now time.Time) {
	m, err := g.cfg.Shape.message(g.fleet.id(dev), now, g.cfg.Class, g.cfg.TimeoutMs, g.cfg.Avro)
	if err != nil {
		g.stats.Errors++
		return
	}
	g.msgs = append(g.msgs, m)
}
