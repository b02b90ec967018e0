package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatline-dev/flatline/internal/e2e/e2etest"
)

// The bench's arithmetic and parsing; no test here measures speed.

func TestHistQuantileUsesTheScrapeDifference(t *testing.T) {
	const h = "flatline_detection_lateness_seconds"
	// scrape is a /metrics page with the histogram's cumulative bucket
	// counts at le 0.01, 0.03, 0.1 and +Inf.
	scrape := func(counts ...int) e2etest.Metrics {
		page := "# TYPE " + h + " histogram\n"
		for i, le := range []string{"0.01", "0.03", "0.1", "+Inf"} {
			page += fmt.Sprintf("%s_bucket{le=%q} %d\n", h, le, counts[i])
		}
		page += fmt.Sprintf("%s_sum 1\n%s_count %d\n", h, h, counts[3])
		m, err := e2etest.ParseMetrics([]byte(page))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := scrape(100, 100, 100, 100)
	// 100 new observations: 90 within 10 ms, 9 more within 30 ms, 1 within 100 ms.
	after := scrape(190, 199, 200, 200)
	if b, n := histQuantile(before, after, h, 0.99); b != 0.03 || n != 100 {
		t.Fatalf("p99 = %v over %v, want the 0.03 bucket over 100", b, n)
	}
	if b, _ := histQuantile(before, after, h, 0.5); b != 0.01 {
		t.Fatalf("p50 = %v, want 0.01", b)
	}
	if b, n := histQuantile(after, after, h, 0.99); b != 0 || n != 0 {
		t.Fatalf("no new observations: %v, %v", b, n)
	}
}

// Each ingest stage's p99 comes from its own histogram, in ms.
func TestStagesReadTheirOwnHistograms(t *testing.T) {
	scrape := func(add int) e2etest.Metrics {
		page := ""
		for k, h := range []string{"flatline_ingest_fetch_seconds", "flatline_ingest_queue_seconds", "flatline_ingest_write_seconds"} {
			// Histogram k holds every new observation in bucket k.
			page += "# TYPE " + h + " histogram\n"
			n := 0
			for i, le := range []string{"0.005", "0.02", "0.05", "+Inf"} {
				if i == k {
					n += add
				}
				page += fmt.Sprintf("%s_bucket{le=%q} %d\n", h, le, n)
			}
			page += fmt.Sprintf("%s_sum 1\n%s_count %d\n", h, h, n)
		}
		m, err := e2etest.ParseMetrics([]byte(page))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	got := stagesBetween(scrape(0), scrape(50))
	if want := (Stages{Fetch: 5, Queue: 20, Write: 50}); got != want {
		t.Fatalf("stages %+v, want %+v", got, want)
	}
	if s := got.String(); s != "5.0 / 20.0 / 50.0" {
		t.Fatalf("shown as %q", s)
	}
}

func TestReadMicro(t *testing.T) {
	out := `goos: linux
pkg: github.com/flatline-dev/flatline/shard
BenchmarkBatch-2        	     770	    565397 ns/op	       138.0 ns/heartbeat	   98781 B/op	    8192 allocs/op
PASS
pkg: github.com/flatline-dev/flatline/scanner
BenchmarkDrain-2   	      12	  27175589 ns/op	     73595 members/s	 1024422 B/op	   17677 allocs/op
`
	path := filepath.Join(t.TempDir(), "micro.txt")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, raw, err := readMicro(path)
	if err != nil || raw != out {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d results", len(rs))
	}
	b := rs[0]
	if b.Package != "github.com/flatline-dev/flatline/shard" || b.Name != "BenchmarkBatch-2" || b.Iterations != 770 ||
		b.Metrics["ns/op"] != 565397 || b.Metrics["ns/heartbeat"] != 138 || b.Metrics["allocs/op"] != 8192 {
		t.Fatalf("first = %+v", b)
	}
	if rs[1].Package != "github.com/flatline-dev/flatline/scanner" || rs[1].Metrics["members/s"] != 73595 {
		t.Fatalf("second = %+v", rs[1])
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -2500: "-2,500", 1.5: "1.50"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

// The lateness target that follows the machine: every run under load at
// most twice the trickle's p99 of the same bench run, else missed.
func TestLatenessRatioRow(t *testing.T) {
	for _, tc := range []struct {
		runs []float64
		want string
	}{
		{[]float64{18, 20, 19.9}, "met"},
		{[]float64{18, 20.1, 19}, "MISSED"},
	} {
		load := &LatenessResult{Probes: 10, Received: 10}
		for _, p99 := range tc.runs {
			load.Runs = append(load.Runs, LatenessRun{Received: 10, P99Ms: p99})
		}
		trickle := &LatenessResult{Probes: 10, Received: 10}
		trickle.Lateness.P99 = 10
		r := &Result{Lateness: load, LatenessSparse: trickle}
		r.buildTable()
		got := ""
		for _, row := range r.Table {
			if strings.HasPrefix(row.Measure, "each run's p99 / the trickle's p99") {
				got = row.Status
			}
		}
		if got != tc.want {
			t.Errorf("runs %v against a 10 ms trickle: %q, want %q", tc.runs, got, tc.want)
		}
	}
}
