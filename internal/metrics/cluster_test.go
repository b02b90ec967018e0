package metrics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// clusterSeries gathers m and returns, per cluster-wide family, its series
// as "label=value:sample" strings (sorted), absent families left out.
func clusterSeries(t *testing.T, m *Metrics) map[string][]string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "flatline_cluster_state_up", "flatline_layout_shards", "flatline_layout_previous_shards",
			"flatline_shard_devices", "flatline_shard_due_backlog", "flatline_devices_tracked",
			"flatline_devices_down", "flatline_watermark_timestamp_seconds", "flatline_watermark_lag_seconds":
		default:
			continue
		}
		for _, s := range mf.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], key+":"+formatFloat(s.GetGauge().GetValue()))
		}
		sort.Strings(out[mf.GetName()])
	}
	return out
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// fakeClock is a settable clock for the collector's reuse window.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The cluster-wide gauges come from a read at gather time: present with
// what the read returned, absent (not the last values) when it fails, and
// back at the next read that works. One read answers the scrapes within
// ClusterReuse.
func TestClusterGaugesAreReadAtScrapeTimeAndAbsentWhenTheReadFails(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_800_000_000_000)}
	if got := clusterSeries(t, New(Options{Now: clock.now})); len(got) != 0 {
		t.Fatalf("without a reader: %v, want nothing", got)
	}
	var (
		reads int
		fail  error
	)
	m := New(Options{Now: clock.now, Cluster: func(ctx context.Context) (Cluster, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the read got a context without a deadline")
		}
		reads++
		if fail != nil {
			return Cluster{}, fail
		}
		return Cluster{
			LayoutCount: 2, Sizes: []int64{10, 20 + int64(reads)}, Due: []int64{1, 0},
			Down:        map[string]int64{"": 3, "cam": 4},
			Unreachable: map[string]int64{"cam": 1},
			WatermarkMs: clock.now().UnixMilli() - 1500, Now: clock.now(),
		}, nil
	}})

	got := clusterSeries(t, m)
	want := map[string][]string{
		"flatline_cluster_state_up":            {":1"},
		"flatline_layout_shards":               {":2"},
		"flatline_layout_previous_shards":      {":0"},
		"flatline_shard_devices":               {"shard=0:10", "shard=1:21"},
		"flatline_shard_due_backlog":           {"shard=0:1", "shard=1:0"},
		"flatline_devices_tracked":             {":31"},
		"flatline_devices_down":                {"class=camstate=timed_out:3", "class=camstate=unreachable:1", "class=state=timed_out:3", "class=state=unreachable:0"},
		"flatline_watermark_timestamp_seconds": {":" + formatFloat(float64(clock.now().UnixMilli()-1500)/1000)},
		"flatline_watermark_lag_seconds":       {":1.5"},
	}
	if len(got) != len(want) {
		t.Fatalf("first scrape:\n%v\nwant\n%v", got, want)
	}
	for name, w := range want {
		if g := got[name]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v", name, g, w)
		}
	}

	// Within ClusterReuse: the same read answers.
	clock.add(ClusterReuse / 2)
	clusterSeries(t, m)
	if reads != 1 {
		t.Errorf("%d reads for two scrapes within %s, want 1", reads, ClusterReuse)
	}

	// Redis fails: nothing read from it is exported, only that it failed.
	fail = errors.New("connection refused")
	clock.add(ClusterReuse)
	got = clusterSeries(t, m)
	if len(got) != 1 || len(got["flatline_cluster_state_up"]) != 1 || got["flatline_cluster_state_up"][0] != ":0" {
		t.Errorf("after a failed read: %v, want only flatline_cluster_state_up 0", got)
	}

	// It answers again: so do the gauges, with the new values.
	fail = nil
	clock.add(ClusterReuse)
	got = clusterSeries(t, m)
	if g := got["flatline_devices_tracked"]; len(g) != 1 || g[0] != ":33" || got["flatline_cluster_state_up"][0] != ":1" {
		t.Errorf("after Redis is back: %v", got)
	}
	if reads != 3 {
		t.Errorf("%d reads, want 3", reads)
	}
}
