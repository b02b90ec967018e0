package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The bench's arithmetic and parsing; no test here measures speed.

func TestHistQuantileUsesTheScrapeDifference(t *testing.T) {
	const h = "flatline_detection_lateness_seconds"
	before := map[string]float64{
		h + `_bucket{le="0.01"}`: 100, h + `_bucket{le="0.03"}`: 100, h + `_bucket{le="0.1"}`: 100, h + `_bucket{le="+Inf"}`: 100,
	}
	// 100 new observations: 90 within 10 ms, 9 more within 30 ms, 1 within 100 ms.
	after := map[string]float64{
		h + `_bucket{le="0.01"}`: 190, h + `_bucket{le="0.03"}`: 199, h + `_bucket{le="0.1"}`: 200, h + `_bucket{le="+Inf"}`: 200,
	}
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

func TestChildEnvDropsTheCallersSettings(t *testing.T) {
	t.Setenv("FLATLINE_REDIS_ADDRS", "10.0.0.1:6379")
	env := childEnv(map[string]string{"ingest.coalesce_window": "10s", "redis.addrs": "127.0.0.1:1"})
	if !slices.Contains(env, "FLATLINE_INGEST_COALESCE_WINDOW=10s") || !slices.Contains(env, "FLATLINE_REDIS_ADDRS=127.0.0.1:1") {
		t.Fatalf("settings missing: %v", env)
	}
	if slices.Contains(env, "FLATLINE_REDIS_ADDRS=10.0.0.1:6379") {
		t.Fatal("the caller's FLATLINE_ variable leaked into the measured process")
	}
}
