package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Cluster is the state every instance shares through Redis: the layout, the
// shards, the devices down and the firing watermark. Each instance exports
// the same values (dashboards take max() over instances), read when
// /metrics is scraped.
type Cluster struct {
	LayoutCount    int
	LayoutPrevious int
	// Sizes and Due are per shard 0..len-1: members, and members whose
	// deadline is at or before Now (due but not yet fired).
	Sizes []int64
	Due   []int64
	// Down maps a class name ("" = no class, DownAllClasses = not split by
	// class) to the devices down within dispatch.recovery_window.
	Down map[string]int64
	// Unreachable splits Down: per class name as Down has them, the
	// devices down as unreachable (SPEC §14), the others timed out. Nil
	// when they were too many to tell apart at scrape time: then Down's
	// series carry state "*".
	Unreachable map[string]int64
	// WatermarkMs is min over signals partitions of wm(p), Unix ms; 0 when
	// no partition has one yet.
	WatermarkMs int64
	// Stalled is how many signals partitions are stalled (storm guard);
	// HeldSinceMs is when the hold that holds firing now was detected, 0
	// when none does.
	Stalled     int
	HeldSinceMs int64
	// Held maps why devices are held instead of firing to how many are:
	// "gateway", children waiting for their silent parent; "maintenance",
	// devices an open maintenance window holds (parked, not heard since).
	Held map[string]int64
	Now  time.Time
}

// DownAllClasses labels flatline_devices_down when the devices down are too
// many to split by class at scrape time: one series holds them all, so
// sum(flatline_devices_down) is the total either way.
const DownAllClasses = "*"

// ClusterReader reads the Cluster from Redis; an error means nothing of it
// is known (a partial read is an error: a sum over the shards read would
// look like lost devices).
type ClusterReader func(ctx context.Context) (Cluster, error)

// ClusterReadTimeout bounds one read of the cluster state at scrape time.
const ClusterReadTimeout = 2 * time.Second

// ClusterReuse is how long one read of the cluster state answers further
// scrapes: the status page scrapes every 2 s per open tab, and each read
// costs Redis a few round trips.
const ClusterReuse = time.Second

// clusterCollector exports the Cluster as a prometheus.Collector: read from
// Redis when the registry is gathered, and absent when the read fails, so a
// Redis outage never leaves the last values behind looking current. Only
// flatline_cluster_state_up and the read's duration are always there.
type clusterCollector struct {
	now func() time.Time

	read ClusterReader // nil: nothing is exported

	mu       sync.Mutex // one read at a time; guards the fields below
	last     Cluster
	lastOK   bool
	lastAt   time.Time
	lastTook time.Duration

	up, took, layout, previous, size, due, tracked, down, wm, wmLag, stalled, held, devicesHeld *prometheus.Desc
}

func newClusterCollector(read ClusterReader, now func() time.Time) *clusterCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &clusterCollector{
		read:        read,
		now:         now,
		up:          d("flatline_cluster_state_up", "1 when this scrape read the cluster-wide state from Redis; 0 when the read failed, and the gauges read from Redis are absent."),
		took:        d("flatline_cluster_state_read_seconds", "How long the last read of the cluster-wide state from Redis took."),
		layout:      d("flatline_layout_shards", "The layout's shard count."),
		previous:    d("flatline_layout_previous_shards", "The layout's previous count while migrating, else 0."),
		size:        d("flatline_shard_devices", "Devices tracked per shard.", "shard"),
		due:         d("flatline_shard_due_backlog", "Members due but not yet fired per shard (held by the watermark or in flight).", "shard"),
		tracked:     d("flatline_devices_tracked", "Devices tracked, all shards (the sum of flatline_shard_devices)."),
		down:        d("flatline_devices_down", "Devices timed out within dispatch.recovery_window and not beating since, by class (\"\" = none; \"*\" = all, when too many to split by class at scrape time) and state (timed_out; unreachable: silent while their parent was down; \"*\": both, when too many to tell apart).", "class", "state"),
		wm:          d("flatline_watermark_timestamp_seconds", "The firing watermark: min over signals partitions of wm(p), Unix seconds."),
		wmLag:       d("flatline_watermark_lag_seconds", "How far the firing watermark is behind now."),
		stalled:     d("flatline_partitions_stalled", "Signals partitions stalled: busy, and their high-water mark standing still (storm guard)."),
		held:        d("flatline_firing_held_seconds", "How long stalled partitions have held firing, from the stall's detection; 0 when they do not."),
		devicesHeld: d("flatline_devices_held", "Devices whose deadline passed and that are held instead of firing, by reason (gateway: a child waiting for its silent parent; maintenance: an open maintenance window).", "reason"),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.took, c.layout, c.previous, c.size, c.due, c.tracked, c.down, c.wm, c.wmLag, c.stalled, c.held, c.devicesHeld} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the cluster state
// unless a read within ClusterReuse answers, and exports it. Without a
// reader it exports nothing.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	cl, ok, took, set := c.get()
	if !set {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.took, took.Seconds())
	if !ok {
		gauge(c.up, 0)
		return
	}
	gauge(c.up, 1)
	gauge(c.layout, float64(cl.LayoutCount))
	gauge(c.previous, float64(cl.LayoutPrevious))
	var tracked int64
	for i, n := range cl.Sizes {
		gauge(c.size, float64(n), strconv.Itoa(i))
		tracked += n
	}
	gauge(c.tracked, float64(tracked))
	for i, n := range cl.Due {
		gauge(c.due, float64(n), strconv.Itoa(i))
	}
	c.collectDown(cl, gauge)
	gauge(c.stalled, float64(cl.Stalled))
	held := 0.0
	if cl.HeldSinceMs > 0 {
		held = max(0, float64(cl.Now.UnixMilli()-cl.HeldSinceMs)/1000)
	}
	gauge(c.held, held)
	for reason, n := range cl.Held {
		gauge(c.devicesHeld, float64(n), reason)
	}
	if cl.WatermarkMs > 0 {
		gauge(c.wm, float64(cl.WatermarkMs)/1000)
		gauge(c.wmLag, max(0, float64(cl.Now.UnixMilli()-cl.WatermarkMs)/1000))
	}
}

// collectDown exports flatline_devices_down{class, state}.
func (c *clusterCollector) collectDown(cl Cluster, gauge func(d *prometheus.Desc, v float64, labels ...string)) {
	var allUnreachable int64
	for _, n := range cl.Unreachable {
		allUnreachable += n
	}
	for class, n := range cl.Down {
		if cl.Unreachable == nil {
			gauge(c.down, float64(n), class, StateAll)
			continue
		}
		u := cl.Unreachable[class]
		if class == DownAllClasses {
			u = allUnreachable
		}
		u = min(u, n)
		gauge(c.down, float64(n-u), class, "timed_out")
		gauge(c.down, float64(u), class, "unreachable")
	}
}

// StateAll labels flatline_devices_down when the unreachable devices are
// too many to tell from the timed-out ones at scrape time.
const StateAll = "*"

// get returns the cluster state read within ClusterReuse, reading it now
// when there is none; set is false without a reader.
func (c *clusterCollector) get() (cl Cluster, ok bool, took time.Duration, set bool) {
	if c.read == nil {
		return Cluster{}, false, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.now()
	if c.lastAt.IsZero() || start.Sub(c.lastAt) >= ClusterReuse || start.Before(c.lastAt) {
		ctx, cancel := context.WithTimeout(context.Background(), ClusterReadTimeout)
		cl, err := c.read(ctx)
		cancel()
		c.last, c.lastOK, c.lastAt, c.lastTook = cl, err == nil, start, c.now().Sub(start)
	}
	return c.last, c.lastOK, c.lastTook, true
}
