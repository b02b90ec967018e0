package ingest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch the broker never answers must not stall a partition: its socket
// deadline (fetch max-wait + grace) ends it, ingest reopens the connection
// and the records behind it are written.
func TestLostFetchDoesNotStallPartition(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Beats for a device of every partition, so all are written first.
	var first []string
	for i := 0; i < 40; i++ {
		first = append(first, fmt.Sprintf("before-%02d", i))
	}
	for _, id := range first {
		r.produce(t, beat(id))
	}
	r.waitCommitted(t, r.endOffsets(t))
	// From now on, swallow one fetch of the signals topic: no answer, ever.
	swallowed := make(chan struct{})
	r.kafka.Cluster().ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f := req.(*kmsg.FetchRequest)
		for _, tp := range f.Topics {
			if tp.Topic == signals && len(tp.Partitions) > 0 {
				close(swallowed)
				return nil, nil, true
			}
		}
		r.kafka.Cluster().KeepControl()
		return nil, nil, false
	})
	select {
	case <-swallowed:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch of the signals topic to swallow")
	}
	var after []string
	for i := 0; i < 40; i++ {
		after = append(after, fmt.Sprintf("after-%02d", i))
	}
	start := time.Now()
	for _, id := range after {
		r.produce(t, beat(id))
	}
	r.waitCommitted(t, r.endOffsets(t))
	for _, id := range after {
		if !r.tracked(t, id) {
			t.Errorf("%s not tracked", id)
		}
	}
	t.Logf("every partition written again %v after the lost fetch", time.Since(start).Round(time.Millisecond))
}
