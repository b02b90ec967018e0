package ingest

import (
	"testing"

	"github.com/flatline-dev/flatline/shard"
)

// A heartbeat after a tombstone of the same device in one batch re-registers
// it: the entry is marked so its old state is forgotten before the write,
// keeps that mark when a later heartbeat replaces it, and makes the batch
// an ordered one. A tombstone after it deregisters again.
func TestPutTombstoneThenHeartbeat(t *testing.T) {
	t.Parallel()
	p := &processor{latest: make(map[string]int)}
	score := func(ms int64) float64 { return shard.Score(shard.Epoch+ms, 0) }
	p.put(entry{id: "a", score: score(5000)})
	if p.ordered() {
		t.Fatal("a batch of plain heartbeats is ordered")
	}
	p.put(entry{id: "a", tomb: true})
	p.put(entry{id: "a", score: score(1000)})
	p.put(entry{id: "a", score: score(2000)})
	p.put(entry{id: "a", score: score(1500)})
	e := p.entries[p.latest["a"]]
	if e.tomb || !e.reregister || e.score != score(2000) || e.beats != 5 {
		t.Fatalf("entry %+v, want the latest heartbeat (2000), re-registering, standing for 5 records", e)
	}
	if !p.ordered() {
		t.Error("a batch re-registering a device is not ordered")
	}
	p.put(entry{id: "a", tomb: true})
	if e := p.entries[p.latest["a"]]; !e.tomb {
		t.Errorf("a tombstone after the re-registration lost: %+v", e)
	}
}
