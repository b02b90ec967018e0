package metrics

import (
	"runtime"
	"testing"
)

// buildInfo returns the labels of every flatline_build_info series and
// fails unless each is 1.
func buildInfo(t *testing.T, m *Metrics) []map[string]string {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != "flatline_build_info" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if v := s.GetGauge().GetValue(); v != 1 {
				t.Errorf("flatline_build_info = %v, want 1", v)
			}
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, labels)
		}
	}
	return out
}

func TestBuildInfoIsOneSeriesWithTheVersionHandedDown(t *testing.T) {
	t.Parallel()
	m := New(Options{})
	got := buildInfo(t, m)
	if len(got) != 1 || got[0]["version"] != UnknownVersion || got[0]["goversion"] != runtime.Version() {
		t.Fatalf("before SetVersion: %v", got)
	}
	m.SetVersion("v1.2.3")
	m.SetVersion("v1.2.4")
	got = buildInfo(t, m)
	if len(got) != 1 || got[0]["version"] != "v1.2.4" || got[0]["goversion"] != runtime.Version() {
		t.Fatalf("after SetVersion: %v, want one series {version=v1.2.4, goversion=%s}", got, runtime.Version())
	}
}
