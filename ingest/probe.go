package ingest

import (
	"context"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// probe moves the watermark of every caught-up partition to the send time
// of a high-water-mark probe, and reports lag.
func (in *Ingest) probe(ctx context.Context, client *kafka.Client, pos map[int]*position) {
	topic := in.opts.Kafka.SignalsTopic
	partitions := 0
	// The high-water mark (read_uncommitted), not the last stable offset
	// the readers stop at: a plain record appended behind an open
	// transaction cannot be read until the transaction ends, and the
	// watermark must not pass it meanwhile.
	reqs := make([]kafka.OffsetRequest, 0, len(pos))
	for p := range pos {
		reqs = append(reqs, kafka.LastOffsetOf(p))
	}
	t := time.NewTicker(in.cfg.ProbeInterval)
	defer t.Stop()
	// The partitions are this generation's: once it ends, another instance
	// may own them, and a lag left behind here would be stale (and could
	// keep FlatlineConsumerLagHigh firing). kafka-go starts the next
	// generation only after this one's goroutines returned, so the next
	// prober sets its own partitions' series afresh.
	if in.opts.Metrics != nil {
		defer func() {
			for p := range pos {
				in.opts.Metrics.ConsumerLag.DeleteLabelValues(strconv.Itoa(p))
			}
		}()
	}
	wms := make(map[int]int64, len(pos))
	for {
		if partitions == 0 {
			md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
			if err == nil && len(md.Topics) == 1 && md.Topics[0].Error == nil {
				partitions = len(md.Topics[0].Partitions)
			}
		}
		sent := in.opts.Now().UnixMilli()
		resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
		if err == nil {
			clear(wms)
			for _, po := range resp.Topics[topic] {
				p := pos[po.Partition]
				if po.Error != nil || p == nil {
					continue
				}
				lag := po.LastOffset - p.written.Load()
				switch {
				case lag > 0:
					p.addMark(mark{sentMs: sent, offset: po.LastOffset})
				case lag == 0 && !p.moving():
					wms[po.Partition] = sent
				default:
					// Written past the partition's end: a committed offset
					// the partition does not hold (the topic recreated, the
					// log truncated), or the reader is moving off one. The
					// partition cannot be read from there, so it is not
					// caught up, whatever its written offset says.
					lag = 0
				}
				if in.opts.Metrics != nil {
					in.opts.Metrics.ConsumerLag.WithLabelValues(strconv.Itoa(po.Partition)).Set(float64(lag))
				}
			}
			if err := in.opts.Store.RaiseWatermarks(ctx, partitions, wms); err != nil {
				if ctx.Err() == nil {
					in.opts.Log.Debug("raise watermarks", "err", err)
				}
			} else if in.opts.Raised != nil {
				in.opts.Raised(wms)
			}
		} else if ctx.Err() == nil {
			in.opts.Log.Debug("probe high-water marks", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
