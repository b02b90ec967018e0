package kfetch

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// What comes back from kfake for a topic created with
// message.timestamp.type=LogAppendTime: kfake accepts the config but does
// not act on it, so the batch is stored as the producer wrote it
// (CreateTime) and the record's time is the producer's. LogAppendTime
// reports the batch's own attribute, not the topic's config.
//
// kfake stamps append time only into a batch that arrives with attribute
// bit 3 already set, and then rewrites its first and max timestamps without
// recomputing the batch's CRC, so both paths reject that batch (CRC
// mismatch) and it cannot be read here at all. The Apache Kafka shape of a
// LogAppendTime batch is covered by
// TestLogAppendTimeRecordsGetTheAppendTimeOnlyThroughConn.
func TestLogAppendTimeTopicOnKfakeReturnsTheProducersTime(t *testing.T) {
	t.Parallel()
	const topic = "by-config"
	r := newRig(t)
	r.createTopic(t, topic, map[string]string{"message.timestamp.type": "LogAppendTime"})
	created := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	produce(t, r.producer(t, topic), &kgo.Record{Value: []byte("a"), Timestamp: created})

	attrs := r.batchAttrs(t, topic)
	if len(attrs) != 1 || attrs[0]&attrLogAppendTime != 0 {
		t.Errorf("kfake stored batches with attributes %v, want one without LogAppendTime", attrs)
	}
	for name, f := range r.paths(t, DefaultConfig()) {
		recs, _ := readToStable(t, f, topic, 0)
		if len(recs) != 1 || recs[0].LogAppendTime || recs[0].TimeMs != created.UnixMilli() {
			t.Errorf("%s read %+v; want one record, LogAppendTime false, time %d (the producer's)", name, recs, created.UnixMilli())
		}
	}
}
