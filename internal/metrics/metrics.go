// Package metrics defines every Prometheus metric flatline exports, in one
// place, so names follow one convention (flatline_…_total, _seconds, base
// units) and stages only increment what they own.
package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics is the set of flatline's collectors, registered on one registry.
type Metrics struct {
	Registry *prometheus.Registry

	HeartbeatsConsumed prometheus.Counter
	Invalid            *prometheus.CounterVec // reason
	Fallbacks          *prometheus.CounterVec // kind: skew_corrected, timeout_out_of_range, unknown_class, self_parent
	Tombstones         prometheus.Counter
	Deviceless         prometheus.Counter
	RedisWrites        prometheus.Counter // deadline writes sent (members)
	RedisBatches       prometheus.Counter
	Coalesced          prometheus.Counter
	DeadLettered       prometheus.Counter
	IngestErrors       prometheus.Counter
	FetchErrors        prometheus.Counter
	ConsumerLag        *prometheus.GaugeVec // partition
	// The path of a heartbeat from Kafka to Redis, which the watermark
	// waits for: IngestFetch the brokers' answers to fetches that brought
	// records, IngestQueue flatline's own hand-off, merge and decoding (a
	// fetch's answer to the start of the Redis write of the batch holding
	// its records), IngestWrite the Redis write.
	IngestFetch prometheus.Histogram
	IngestQueue prometheus.Histogram
	IngestWrite prometheus.Histogram
	// IngestReleased is 1 while this instance's ingest is out of the
	// consumer group because its Redis writes went unanswered for
	// ingest.release_after, else 0.
	IngestReleased prometheus.Gauge

	TimeoutsPublished  prometheus.Counter
	RecoveredPublished prometheus.Counter
	// UnreachablePublished counts the unreachable events (SPEC §14)
	// acknowledged, which TimeoutsPublished counts too.
	UnreachablePublished prometheus.Counter
	PublishErrors        *prometheus.CounterVec // reason: PublishReasons
	Lateness             prometheus.Histogram

	ScanErrors   prometheus.Counter
	StaleDropped prometheus.Counter
	// ReplaysDropped counts members not later than a timeout their device
	// already fired, dropped by the scanner instead of firing again.
	ReplaysDropped prometheus.Counter
	Moved          prometheus.Counter

	// Storms counts the storms this instance announced (one instance
	// names storms at a time: sum over instances); StormHoldsExpired the
	// holds of this instance's partitions that storm.max_hold ended.
	Storms            prometheus.Counter
	StormHoldsExpired prometheus.Counter

	LeasesOwned prometheus.Gauge
	LeaseOwned  *prometheus.GaugeVec // shard
	Misplaced   prometheus.Gauge

	// BuildInfo is flatline_build_info{version, goversion}: one series,
	// always 1, so dashboards can join on the running version.
	BuildInfo *prometheus.GaugeVec

	// cluster exports the state shared through Redis (layout, shard sizes,
	// due backlog, devices tracked and down, watermark), read at scrape
	// time: see Options.Cluster.
	cluster *clusterCollector
}

// InvalidReasons are the reason codes of the README's "Messages" (decode.AllReasons; a test keeps
// the two equal). Their counters are exported at 0 from the start so that
// rate() and alerts see a series before the first invalid message.
var InvalidReasons = []string{
	"not_object", "trailing_data", "bad_type", "bad_ts", "no_key",
	"key_too_long", "key_not_utf8", "id_mismatch", "too_large", "unknown_class",
	"no_device_id", "bad_payload", "unknown_schema",
}

// FallbackKinds label flatline_heartbeats_fallback_total.
var FallbackKinds = []string{"skew_corrected", "timeout_out_of_range", "unknown_class", "self_parent"}

// PublishReasons label flatline_publish_errors_total: why a produce attempt
// of events failed (dispatch's reason for an error). too_large and
// authorization are the ones no retry fixes: an operator must act.
var PublishReasons = []string{"not_leader", "unknown_topic", "timeout", "network", "too_large", "authorization", "other"}

// LatenessBuckets resolve 1 ms to 10 s.
var LatenessBuckets = []float64{.001, .002, .005, .01, .015, .02, .03, .05, .075, .1, .15, .25, .5, 1, 2.5, 5, 10}

// Options are what New wires into the metrics.
type Options struct {
	// Cluster reads the cluster-wide state /metrics exports, called at
	// scrape time (at most once per ClusterReuse). Default: nil, none of
	// that state is exported.
	Cluster ClusterReader
	// Now is the clock of ClusterReuse. Default: time.Now.
	Now func() time.Time
}

// New creates and registers all metrics on a fresh registry (with the Go
// and process collectors).
func New(opts Options) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{Registry: r}
	m.newCounters(r)
	m.newGauges(r)
	m.newHistograms(r)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m.cluster = newClusterCollector(opts.Cluster, opts.Now)
	r.MustRegister(m.cluster)
	r.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.SetVersion(UnknownVersion)
	// The labelled counters start at 0, so rate() and alerts see a series
	// before the first event.
	for _, reason := range InvalidReasons {
		m.Invalid.WithLabelValues(reason)
	}
	for _, kind := range FallbackKinds {
		m.Fallbacks.WithLabelValues(kind)
	}
	for _, reason := range PublishReasons {
		m.PublishErrors.WithLabelValues(reason)
	}
	return m
}

// metric is one unlabelled metric New creates: where it goes, its name
// and its help.
type metric[T prometheus.Collector] struct {
	dst        *T
	name, help string
}

// register creates every metric of defs with create and registers it.
func register[T prometheus.Collector](r *prometheus.Registry, create func(name, help string) T, defs []metric[T]) {
	for _, d := range defs {
		*d.dst = create(d.name, d.help)
		r.MustRegister(*d.dst)
	}
}

// registered registers c and returns it.
func registered[T prometheus.Collector](r *prometheus.Registry, c T) T {
	r.MustRegister(c)
	return c
}

// newCounters creates and registers the counters.
func (m *Metrics) newCounters(r *prometheus.Registry) {
	register(r, func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}, []metric[prometheus.Counter]{
		{&m.HeartbeatsConsumed, "flatline_heartbeats_consumed_total", "Messages consumed from the signals topic."},
		{&m.Tombstones, "flatline_tombstones_total", "Tombstones that deregistered a device."},
		{&m.Deviceless, "flatline_heartbeats_deviceless_total", "Null values skipped because their device id would come from the value (ingest.from.device_id value: or payload:)."},
		{&m.RedisWrites, "flatline_redis_deadline_writes_total", "Device deadlines written to Redis (ZADD GT members)."},
		{&m.RedisBatches, "flatline_redis_write_batches_total", "Pipelined write round trips of ingest."},
		{&m.Coalesced, "flatline_resets_coalesced_total", "Heartbeats whose Redis write was skipped by ingest.coalesce_window."},
		{&m.DeadLettered, "flatline_dead_lettered_total", "Invalid heartbeats copied to the dead-letter topic."},
		{&m.IngestErrors, "flatline_ingest_errors_total", "Ingest batches that failed and were retried."},
		{&m.FetchErrors, "flatline_fetch_errors_total", "Fetches of the signals topic that failed, whole or for one partition (and leader look-ups that failed): a broker's connection is reopened, or the partition routed to its leader again, after a backoff."},
		{&m.TimeoutsPublished, "flatline_timeouts_published_total", "Timeout events acknowledged by Kafka."},
		{&m.RecoveredPublished, "flatline_recoveries_published_total", "Recovered events acknowledged by Kafka."},
		{&m.UnreachablePublished, "flatline_unreachable_total", "Unreachable events (a device silent while its parent is down) acknowledged by Kafka; flatline_timeouts_published_total counts them too."},
		{&m.ScanErrors, "flatline_scan_errors_total", "Scanner passes that failed."},
		{&m.StaleDropped, "flatline_stale_copies_dropped_total", "Stale copies of a device in its previous shard dropped during a migration."},
		{&m.ReplaysDropped, "flatline_replays_dropped_total", "Replayed heartbeats not later than a timeout their device already fired, dropped by the scanner instead of firing it again."},
		{&m.Moved, "flatline_members_moved_total", "Members moved to their new shard during a migration."},
		{&m.Storms, "flatline_storms_total", "Storms announced (storm_started events) by this instance."},
		{&m.StormHoldsExpired, "flatline_storm_holds_expired_total", "Holds of stalled signals partitions that storm.max_hold ended, so that their held deadlines fired."},
	})
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return registered(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
	}
	m.Invalid = counter("flatline_heartbeats_invalid_total", "Invalid heartbeats, by reason code.", "reason")
	m.PublishErrors = counter("flatline_publish_errors_total", "Failed produce attempts of events (retried), by reason.", "reason")
	m.Fallbacks = counter("flatline_heartbeats_fallback_total", "Valid heartbeats that fell back to a default (skew_corrected, timeout_out_of_range, unknown_class, self_parent).", "kind")
}

// newGauges creates and registers the gauges of this process.
func (m *Metrics) newGauges(r *prometheus.Registry) {
	register(r, func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}, []metric[prometheus.Gauge]{
		{&m.LeasesOwned, "flatline_scanner_leases_owned", "Shards whose scanner runs on this instance."},
		{&m.Misplaced, "flatline_migration_misplaced_members", "Members still in their previous shard (last sweep's count)."},
		{&m.IngestReleased, "flatline_ingest_released", "1 while this instance's ingest is out of the consumer group because its Redis writes went unanswered for ingest.release_after (its partitions read by the other instances), else 0."},
	})
	m.ConsumerLag = registered(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flatline_consumer_lag_messages",
		Help: "Messages not yet written to Redis, per signals partition this instance owns."}, []string{"partition"}))
	m.LeaseOwned = registered(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flatline_scanner_lease_owned",
		Help: "1 when this instance owns the shard's scanner lease."}, []string{"shard"}))
	m.BuildInfo = registered(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flatline_build_info",
		Help: "Always 1; labelled with the version flatline was built as and the Go version it was built with."}, []string{"version", "goversion"}))
}

// newHistograms creates and registers the histograms, all over
// LatenessBuckets.
func (m *Metrics) newHistograms(r *prometheus.Registry) {
	register(r, func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatenessBuckets})
	}, []metric[prometheus.Histogram]{
		{&m.Lateness, "flatline_detection_lateness_seconds", "Time from a device's deadline to Kafka acknowledging its timeout event."},
		{&m.IngestFetch, "flatline_ingest_fetch_seconds", "Time a broker reader waited for the answer to a fetch of the signals topic, for answers that brought records: from the send, or, for a fetch sent ahead while the last answer's records were handed on, from the end of that hand-off; the brokers' round trip and their wait for records."},
		{&m.IngestQueue, "flatline_ingest_queue_seconds", "Time from a fetch's answer to the start of the Redis write of the batch holding its oldest records: hand-off, merge by record time, decoding and the wait for the writer."},
		{&m.IngestWrite, "flatline_ingest_write_seconds", "Time of a batch's Redis write (deadlines, the down-set look-up, retries), from its start to its last answer."},
	})
}

// UnknownVersion labels flatline_build_info until SetVersion is called.
const UnknownVersion = "unknown"

// SetVersion labels flatline_build_info with the binary's version. The
// version is set at link time in cmd/flatline (main.version), which only the
// composition root can read, so it is handed down rather than looked up.
func (m *Metrics) SetVersion(version string) {
	m.BuildInfo.Reset()
	m.BuildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// PublishErrorsTotal is flatline_publish_errors_total summed over its
// reasons.
func (m *Metrics) PublishErrorsTotal() float64 {
	var sum float64
	for _, r := range PublishReasons {
		var d dto.Metric
		if err := m.PublishErrors.WithLabelValues(r).Write(&d); err == nil {
			sum += d.GetCounter().GetValue()
		}
	}
	return sum
}
