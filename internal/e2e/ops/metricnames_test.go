package ops

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flatline-dev/flatline/decode"
	"github.com/flatline-dev/flatline/deploy"
	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
	"github.com/flatline-dev/flatline/internal/metrics"
)

var (
	dashboardFile = filepath.Join("..", "..", "..", "deploy", "grafana", "flatline.json")
	metricName    = regexp.MustCompile(`flatline_[a-z_]+`)
)

// TestDashboardAndAlertsUseExportedMetrics scrapes /metrics of an instance
// that has done some work (heartbeats, timeouts, an invalid message) and
// checks that every metric name in the Grafana dashboard's queries and in
// the alert rules is one it exports, and that every dashboard panel queries
// at least one. It also checks the cluster-wide gauges hold the values
// /status reports, since the dashboard and the "shard without scanner" alert
// compare them.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	const shards, live, silent = 4, 50, 5
	in := startInstance(t, shards)
	msgs := append(heartbeats("live-", live, 0), heartbeats("silent-", silent, 1000)...)
	msgs = append(msgs, heartbeat{key: "broken-1", raw: []byte("not json")})
	in.send(t, msgs)

	var exp e2etest.Metrics
	e2etest.EventuallyNil(t, 20*time.Second, "timeouts published and the fleet tracked", func() error {
		exp = in.metrics(t)
		if got := exp.Sum("flatline_timeouts_published_total"); got < silent {
			return fmt.Errorf("%v timeouts published, want %d", got, silent)
		}
		if got := exp.Sum("flatline_shard_devices"); got != live {
			return fmt.Errorf("flatline_shard_devices sums to %v, want %d", got, live)
		}
		if got := exp.Sum("flatline_dead_lettered_total"); got != 1 {
			return fmt.Errorf("%v dead-lettered, want 1", got)
		}
		return nil
	})

	// The cluster-wide gauges agree with /status.
	st := in.status(t)
	if got := exp.Sum("flatline_layout_shards"); got != float64(st.Layout.Count) || st.Layout.Count != shards {
		t.Errorf("flatline_layout_shards = %v, /status layout count %d, configured %d", got, st.Layout.Count, shards)
	}
	if got := exp.Samples("flatline_shard_devices"); got != shards {
		t.Errorf("flatline_shard_devices has %d series, want one per shard (%d)", got, shards)
	}
	if got := exp.Samples("flatline_shard_due_backlog"); got != shards {
		t.Errorf("flatline_shard_due_backlog has %d series, want one per shard (%d)", got, shards)
	}
	if got := exp.Sum("flatline_scanner_leases_owned"); got != shards {
		t.Errorf("flatline_scanner_leases_owned = %v, want %d", got, shards)
	}
	if exp.Sum("flatline_watermark_timestamp_seconds") <= 0 {
		t.Errorf("flatline_watermark_timestamp_seconds is not set")
	}
	if got := exp.Samples("flatline_heartbeats_invalid_total"); got != len(decode.AllReasons) {
		t.Errorf("flatline_heartbeats_invalid_total has %d series, want one per reason (%d)", got, len(decode.AllReasons))
	}
	reasons := make([]string, len(decode.AllReasons))
	for i, r := range decode.AllReasons {
		reasons[i] = string(r)
	}
	if !slices.Equal(reasons, metrics.InvalidReasons) {
		t.Errorf("metrics.InvalidReasons = %v, decode.AllReasons = %v", metrics.InvalidReasons, reasons)
	}

	used := map[string]bool{}
	check := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: query uses no flatline metric: %s", where, expr)
		}
		for _, n := range names {
			family := family(exp, n)
			if family == "" {
				t.Errorf("%s: %s is not exported by a running instance (query: %s)", where, n, oneLine(expr))
				continue
			}
			used[family] = true
		}
	}

	panels, queries := dashboardQueries(t)
	if len(panels) < 10 {
		t.Fatalf("dashboard has %d panels with queries; parsing is broken", len(panels))
	}
	for _, p := range panels {
		if len(p.exprs) == 0 {
			t.Errorf("dashboard panel %q has no query", p.title)
		}
		for _, e := range p.exprs {
			check(fmt.Sprintf("dashboard panel %q", p.title), e)
		}
	}
	for _, q := range queries {
		check("dashboard variable", q)
	}

	rules, err := deploy.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 5 {
		t.Fatalf("alerts.yml has %d rules; parsing is broken", len(rules))
	}
	for _, r := range rules {
		check("alert "+r.Name(), r.Expr)
	}

	var unused []string
	for f := range exp {
		if strings.HasPrefix(f, "flatline_") && !used[f] {
			unused = append(unused, f)
		}
	}
	sort.Strings(unused)
	t.Logf("%d flatline metrics used by the dashboard and rules; exported but unused: %v", len(used), unused)
}

// family returns the exported metric family a query identifier refers to
// (a histogram's _bucket, _sum and _count are its family), or "" when the
// scrape has no such series.
func family(m e2etest.Metrics, name string) string {
	if m[name].GetType() != dto.MetricType_HISTOGRAM && m.Samples(name) > 0 {
		return name
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && m[base].GetType() == dto.MetricType_HISTOGRAM && m.Samples(base) > 0 {
			return base
		}
	}
	return ""
}

type panelQueries struct {
	title string
	exprs []string
}

// dashboardQueries returns the queries of every panel (rows excluded,
// collapsed rows' panels included) and of the templating variables.
func dashboardQueries(t *testing.T) ([]panelQueries, []string) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Type    string  `json:"type"`
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []panelQueries
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			pq := panelQueries{title: p.Title}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					pq.exprs = append(pq.exprs, tg.Expr)
				}
			}
			out = append(out, pq)
		}
	}
	walk(d.Panels)
	var vars []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // a plain string query
		}
		vars = append(vars, q.Query)
	}
	return out, vars
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
