package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/metrics"
	"github.com/flatline-dev/flatline/timeouts"
)

// A chunk split at a batch's end hands its next offset — past what its
// fetch skipped (transaction markers, aborted records) — to its tail, and
// its head ends where the tail begins: each batch's written offset is
// exactly past what it holds, and the last reaches past the skipped ones.
func TestSplitChunkKeepsItsNextOffset(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.BatchSize = 7
	kc := kafkaconn.DefaultConfig()
	kc.DeadLetterTopic = ""
	in, err := New(cfg, Options{Policy: timeouts.NewPolicy(timeouts.DefaultConfig(), nil), Kafka: kc,
		Metrics: metrics.New(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunks, free, prepared := make(chan chunk, 1), make(chan *processor, 3), make(chan *processor, 3)
	for _, p := range newProcessors(in, 3) {
		free <- p
	}
	go in.batcher(ctx, chunks, free, prepared)
	msgs := make([]kfetch.Record, 10)
	for k := range msgs {
		id := fmt.Sprintf("d-%d", k)
		msgs[k] = kfetch.Record{Offset: int64(k), Time: time.Now(), Key: []byte(id), Value: []byte(`{}`)}
	}
	chunks <- chunk{partition: 3, msgs: msgs, next: 20, sentMs: time.Now().UnixMilli()}
	for _, want := range []int64{7, 20} {
		select {
		case p := <-prepared:
			offsets, _ := p.written()
			if offsets[3] != want {
				t.Errorf("batch written up to offset %d, want %d", offsets[3], want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no batch")
		}
	}
}
