package main

import (
	"testing"

	"github.com/flatline-dev/flatline/bench/internal/sample"
)

func TestIDIndexInvertsDeviceIDs(t *testing.T) {
	ids := sample.DeviceIDs("m-", 1000)
	for k, id := range ids {
		if got, ok := idIndex("m-", []byte(id), len(ids)); !ok || got != k {
			t.Fatalf("idIndex(%q) = %d, %v; want %d", id, got, ok, k)
		}
	}
	for _, bad := range []string{"", "m-", "x-001", "m-1000", "m-01a", "probe-1"} {
		if k, ok := idIndex("m-", []byte(bad), 1000); ok {
			t.Errorf("idIndex(%q) = %d, want no index", bad, k)
		}
	}
}
