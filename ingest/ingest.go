package ingest

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/shard"
	"github.com/flatline-dev/flatline/storm"
	"github.com/flatline-dev/flatline/timeouts"
)

// LayoutSource gives the layout to route a batch by.
type LayoutSource interface {
	Current() shard.Layout
}

// RecoveryPublisher publishes recovered events, returning once Kafka
// acknowledged them.
type RecoveryPublisher interface {
	Recovered(ctx context.Context, rs []timeouts.Recovery) error
}

// Hooks let tests observe ingest deterministically.
type Hooks struct {
	// Committed runs after a batch's offsets were committed.
	Committed func(offsets map[int]int64)
}

// Options wire an Ingest.
type Options struct {
	Store    *shard.Store
	Layout   LayoutSource
	Policy   *timeouts.Policy
	Kafka    kafkaconn.Config
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Now      func() time.Time
	Recovery RecoveryPublisher // nil: recovered events disabled
	// RecoveryWindow bounds how long after its timeout a device's return
	// counts as a recovery (dispatch.recovery_window).
	RecoveryWindow time.Duration
	// Raised, if set, receives the watermarks (partition → Unix ms) as
	// soon as the records behind them are in Redis, before they are raised
	// there: the scanners of the same process take them at once instead of
	// at their next poll. It must not block and must not keep the map.
	Raised func(wms map[int]int64)
	// Storm is the storm guard's configuration: stalled partitions hold
	// their watermarks (see stall.go).
	Storm storm.Config
	Hooks Hooks
}

// Ingest is the signals-topic consumer.
type Ingest struct {
	cfg  Config
	opts Options
	dec  *decode.Decoder
	avro *decode.Avro // format avro's registry client; nil otherwise
	// headers is set when the decoder reads record headers: only then do
	// the readers copy them.
	headers bool
	dlq     *kafka.Writer
	// dlqRoom is how many bytes of key and value one dead letter may carry
	// so that it fits the dead-letter topic's max.message.bytes (set by Run
	// before any generation starts).
	dlqRoom int
	// writeRedis writes a prepared batch: (*processor).writeRedis, or a
	// test's stand-in.
	writeRedis func(*processor, context.Context) error
	// owned is the current generation's partitions (Owned).
	owned atomic.Pointer[map[int]bool]
	// link tracks whether Redis answers this instance's calls.
	link *redisLink
	// fallbacks are flatline_heartbeats_fallback_total's series, looked
	// up once: a fleet whose clocks are off falls back with every heartbeat,
	// and a look-up by label costs about as much as decoding one.
	fallbacks struct{ skew, timeout, class, self prometheus.Counter }
}

// Owned returns the signals partitions of the current consumer-group
// generation (empty between generations).
func (in *Ingest) Owned() map[int]bool {
	if m := in.owned.Load(); m != nil {
		return *m
	}
	return nil
}

// New builds an ingest.
func New(cfg Config, opts Options) (*Ingest, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	in := &Ingest{cfg: cfg, opts: opts, writeRedis: (*processor).writeRedis, link: newRedisLink(cfg.ReleaseAfter, opts.Log)}
	if m := opts.Metrics; m != nil {
		f := &in.fallbacks
		f.skew, f.timeout = m.Fallbacks.WithLabelValues("skew_corrected"), m.Fallbacks.WithLabelValues("timeout_out_of_range")
		f.class, f.self = m.Fallbacks.WithLabelValues("unknown_class"), m.Fallbacks.WithLabelValues("self_parent")
	}
	dc := cfg.decoderConfig()
	dc.Timeouts = opts.Policy.Config()
	if cfg.Format == decode.FormatAvro {
		a, err := decode.NewAvro(cfg.SchemaRegistry)
		if err != nil {
			return nil, err
		}
		in.avro, dc.Avro = a, a
	}
	dec, err := decode.NewDecoder(dc)
	if err != nil {
		in.closeAvro()
		return nil, err
	}
	in.dec, in.headers = dec, dec.ReadsHeaders()
	if opts.Kafka.DeadLetterTopic != "" {
		tr, err := opts.Kafka.Transport()
		if err != nil {
			in.closeAvro()
			return nil, err
		}
		in.dlq = &kafka.Writer{
			Addr: kafka.TCP(opts.Kafka.Brokers...), Topic: opts.Kafka.DeadLetterTopic, Transport: tr,
			Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, BatchSize: 10000, AllowAutoTopicCreation: true,
			Compression: opts.Kafka.Codec(),
		}
	}
	return in, nil
}

// RedisUnanswered is how long ingest's calls to Redis have gone without an
// answer, and the last error, while that is so now: a call got none (out
// of time, refused on the way) and no call has been answered since, or a
// call has waited longer than a second. It is 0 while Redis answers, and
// while nothing called it lately. /readyz answers from it at once, without
// a ping of its own to wait for.
func (in *Ingest) RedisUnanswered() (time.Duration, error) {
	return in.link.silentFor()
}

// SchemaRegistryHealthy is nil, or why format avro's schema registry
// cannot be reached: ingest holds meanwhile (for /readyz).
func (in *Ingest) SchemaRegistryHealthy() error {
	if in.avro == nil {
		return nil
	}
	return in.avro.Healthy()
}

func (in *Ingest) closeAvro() {
	if in.avro != nil {
		in.avro.Close()
	}
}

// Close releases the dead-letter writer, and its Transport (a Writer
// closes only a Transport it made itself), and the schema registry's client.
func (in *Ingest) Close() error {
	in.closeAvro()
	if in.dlq == nil {
		return nil
	}
	err := in.dlq.Close()
	if tr, ok := in.dlq.Transport.(*kafka.Transport); ok {
		tr.CloseIdleConnections()
	}
	return err
}
