package main

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flatline-dev/flatline/bench/internal/sample"
	"github.com/flatline-dev/flatline/internal/testenv"
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

// The rate producer's hand-made record batches are what kgo's producer
// would have sent: the broker takes them, and a kgo consumer reads back
// every heartbeat, keyed by its device, on the partition kgo's murmur2
// partitioner gives the key, stamped with the time in its value, each
// device's beats in order.
func TestRateProducerBatchesReadBackAsKgoWouldSendThem(t *testing.T) {
	t.Parallel()
	const partitions, rate = 5, 4000
	k := testenv.Kafka(t, partitions, "signals")
	ids := sample.DeviceIDs("rp-", 300)
	p, err := startRateProducer(k.Brokers(), "signals", ids, rate)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	sent := p.sent.Load()
	if sent < int64(len(ids)) || p.failed.Load() != 0 {
		t.Fatalf("sent %d, failed %d; want at least %d sent, none failed", sent, p.failed.Load(), len(ids))
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers()...), kgo.ConsumeTopics("signals"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	part := kgo.StickyKeyPartitioner(nil).ForTopic("signals")
	ctx := testenv.Context(t, 20*time.Second)
	var got int64
	beats := map[string]int{}
	lastTs := map[string]int64{}
	for got < sent {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", got, sent, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			id := string(r.Key)
			if want := int32(part.Partition(r, partitions)); r.Partition != want {
				t.Fatalf("%s on partition %d, kgo's partitioner gives %d", id, r.Partition, want)
			}
			ts := r.Timestamp.UnixMilli()
			if want := fmt.Sprintf(`{"device_id":"%s","ts":%d}`, id, ts); string(r.Value) != want {
				t.Fatalf("value %s, want %s", r.Value, want)
			}
			if ts < lastTs[id] {
				t.Fatalf("%s: beat at %d after one at %d", id, ts, lastTs[id])
			}
			lastTs[id] = ts
			beats[id]++
		})
	}
	if len(beats) != len(ids) {
		t.Fatalf("%d devices beat, want %d", len(beats), len(ids))
	}
	t.Logf("%d heartbeats of %d devices in %d partitions", got, len(beats), partitions)
}

func TestVarintLen(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 20, -(1 << 40), 1<<63 - 1, -1 << 63} {
		if got, want := varintLen(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
}
