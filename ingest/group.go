package ingest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kafkaconn"
	"github.com/flatline-dev/flatline/internal/retry"
)

// Run consumes until ctx is cancelled, joining generation after
// generation of the consumer group. When Redis stops answering this
// instance's writes for ingest.release_after, it leaves the group, so that
// instances that can write take its partitions over, and joins again once
// Redis answers (see redisLink).
func (in *Ingest) Run(ctx context.Context) error {
	in.sizeDeadLetters(ctx)
	stays := newStays(in.cfg.ReleaseAfter)
	for {
		left, err := in.member(ctx)
		if err != nil || !left || ctx.Err() != nil {
			return err
		}
		if !in.stayOut(ctx, stays.next(time.Now())) {
			return nil
		}
		stays.rejoined = time.Now()
	}
}

// member joins the consumer group and consumes until ctx ends (false) or
// the Redis calls of its generations went unanswered for
// ingest.release_after (true: watchLink). Either way it leaves the group:
// kafka-go ends the generation, waits for its goroutines — each Redis call
// of theirs ends by then (redisLink.attempt), and the commit loop commits
// what was written, nothing more — and sends LeaveGroup, so the
// partitions move to the other members at once, from the committed
// offsets, rather than after the session timeout.
func (in *Ingest) member(ctx context.Context) (bool, error) {
	dialer, err := in.opts.Kafka.Dialer()
	if err != nil {
		return false, err
	}
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: in.opts.Kafka.GroupID, Brokers: in.opts.Kafka.Brokers, Dialer: dialer,
		Topics:                []string{in.opts.Kafka.SignalsTopic},
		SessionTimeout:        in.opts.Kafka.SessionTimeout,
		HeartbeatInterval:     heartbeatInterval(in.opts.Kafka.SessionTimeout),
		RebalanceTimeout:      in.opts.Kafka.SessionTimeout,
		JoinGroupBackoff:      groupRetry,
		WatchPartitionChanges: true, PartitionWatchInterval: 5 * time.Second,
		StartOffset: in.startOffset(),
		Logger:      kafka.LoggerFunc(func(string, ...any) {}),
	})
	if err != nil {
		return false, fmt.Errorf("join consumer group %q: %w", in.opts.Kafka.GroupID, err)
	}
	mctx, leave := context.WithCancel(ctx)
	var left atomic.Bool
	var watching sync.WaitGroup
	watching.Go(func() {
		if in.watchLink(mctx) {
			left.Store(true)
			leave()
		}
	})
	// Each generation asks the brokers through a client of its own, whose
	// Transport has no metadata cached from before a rebalance (partitions
	// added to the topic are routed at once). kafka-go hands out the next
	// generation only once every goroutine of the last one has returned,
	// and Close waits for them too: then its client is closed, its
	// connections and metadata goroutine with it.
	var genClient *kafka.Client
	defer func() {
		leave()
		watching.Wait()
		start := time.Now()
		_ = group.Close()
		kafkaconn.CloseClient(genClient)
		in.owned.Store(nil)
		if left.Load() {
			in.opts.Log.Info("left the consumer group", "took", time.Since(start).Round(time.Millisecond))
		}
	}()
	unavailable := retry.Outage{Log: in.opts.Log, Down: "consumer group unavailable, retrying"}
	// A steady pace, like kafka-go's own JoinGroupBackoff: the group is
	// back as soon as the coordinator is.
	rejoin := retry.Backoff{Min: groupRetry, Max: groupRetry}
	for {
		gen, err := retry.Value(mctx, rejoin, func(err error) { unavailable.Failed(err) }, func() (*kafka.Generation, error) {
			return group.Next(mctx)
		})
		if err != nil || mctx.Err() != nil {
			// Only the end of mctx ends the retries.
			return left.Load(), nil
		}
		unavailable.Succeeded()
		kafkaconn.CloseClient(genClient)
		genClient = in.runGeneration(mctx, gen)
	}
}

// heartbeatInterval is how often the group's heartbeats go out. A member
// learns of a rebalance (another instance left or joined: every step of a
// rolling restart, twice) only from its next heartbeat's answer, and with
// kafka-go's eager protocol every partition of every instance stays unread
// from the moment the coordinator begins the rebalance until the last
// member rejoined — firing is held fleet-wide meanwhile. So the interval is
// short: 250 ms (at most a sixth of the session timeout), four small
// requests a second per instance, where session_timeout/6 (1 s by default)
// held firing up to a second per rebalance.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(session/6, 250*time.Millisecond)
}

// groupRetry is the wait after the consumer group failed to start a
// generation.
const groupRetry = 500 * time.Millisecond

// runGeneration starts the goroutines of one consumer-group generation: a
// reader per broker leading assigned partitions, the batcher, the writer,
// the commit and raise loops and the prober. gen.Start ties each to the generation, which
// waits for all of them before the next one begins. It returns the client
// the generation uses, for Run to close once the generation is over.
func (in *Ingest) runGeneration(ctx context.Context, gen *kafka.Generation) *kafka.Client {
	topic := in.opts.Kafka.SignalsTopic
	assigned := gen.Assignments[topic]
	parts := make([]int, len(assigned))
	for k, a := range assigned {
		parts[k] = a.ID
	}
	in.opts.Log.Info("partitions assigned", "generation", gen.ID, "partitions", parts)
	owned := make(map[int]bool, len(parts))
	for _, p := range parts {
		owned[p] = true
	}
	in.owned.Store(&owned)
	client, err := in.client()
	if err != nil {
		in.opts.Log.Error("kafka client", "err", err)
		return nil
	}
	if len(assigned) == 0 {
		// Nothing to read; keep the generation until it ends.
		gen.Start(func(gctx context.Context) { <-gctx.Done() })
		return client
	}
	// The start offsets are asked inside the generation and asked again
	// until they come: returning here instead would leave the partitions
	// assigned to this instance — kafka-go keeps the membership alive —
	// but never read, committed or probed until the next rebalance.
	gen.Start(func(gctx context.Context) {
		unresolved := retry.Outage{Log: in.opts.Log, Down: "cannot resolve start offsets, retrying", Up: "start offsets resolved"}
		starts, err := retry.Value(gctx, retry.Backoff{Min: 20 * time.Millisecond, Max: time.Second}, func(err error) { unresolved.Failed(err) },
			func() (map[int]int64, error) { return in.resolveStarts(gctx, client, assigned) })
		if err != nil {
			return // the generation ended first
		}
		unresolved.Succeeded()
		var guard *stallGuard
		err = retry.Do(gctx, retry.Backoff{Min: 20 * time.Millisecond, Max: time.Second}, func(err error) { unresolved.Failed(err) },
			func() error {
				return in.link.attempt(gctx, "storm guard", func(ctx context.Context) (err error) {
					guard, err = in.loadStallGuard(ctx, parts)
					return err
				})
			})
		if err != nil {
			return // the generation ended first
		}
		in.startPartitions(gen, client, assigned, starts, guard)
		// kafka-go ends a generation as soon as any of its functions
		// returns: this one stays until the generation ends.
		<-gctx.Done()
	})
	return client
}

// startPartitions starts the rest of a generation once its start offsets
// are known: the router, which starts a reader per broker leading some of
// the partitions, the batcher, the writer, the commit and raise loops and
// the prober.
func (in *Ingest) startPartitions(gen *kafka.Generation, client *kafka.Client, assigned []kafka.PartitionAssignment, starts map[int]int64, guard *stallGuard) {
	pos := make(map[int]*position, len(assigned))
	msgs := make(chan chunk, 64)
	dialer, _ := in.opts.Kafka.Dialer()
	fetches := make([]*partitionFetch, 0, len(assigned))
	for _, a := range assigned {
		p := &position{}
		p.written.Store(starts[a.ID])
		pos[a.ID] = p
		fetches = append(fetches, in.newPartitionFetch(a.ID, starts[a.ID], p))
	}
	gen.Start(in.newRouter(dialer, fetches, msgs, guard).run)
	commits := newPendingMax()
	// confirmed is the latest moment the prober confirmed the signals
	// topic's partition count for; no watermark passes it.
	confirmed := new(atomic.Int64)
	raises := newRaiser(in, confirmed, guard)
	// Three batches in flight: the batcher prepares the next while the
	// writer has two in Redis; watermarks and commits stay in order.
	free := make(chan *processor, writesInFlight+1)
	for _, p := range newProcessors(in, writesInFlight+1) {
		free <- p
	}
	prepared := make(chan *processor, 1)
	gen.Start(func(gctx context.Context) { in.batcher(gctx, msgs, free, prepared) })
	gen.Start(func(gctx context.Context) { in.writer(gctx, commits, raises, pos, free, prepared) })
	gen.Start(func(gctx context.Context) { in.commitLoop(gctx, gen, commits) })
	gen.Start(raises.run)
	gen.Start(func(gctx context.Context) { in.probe(gctx, client, pos, confirmed, guard) })
}

// client builds a kafka-go client with a Transport of its own; its owner
// closes it with kafkaconn.CloseClient.
func (in *Ingest) client() (*kafka.Client, error) {
	return in.opts.Kafka.Client(10 * time.Second)
}

// startOffset is kafka.start_offset in kafka-go's words: what the consumer
// group reports as the offset of a partition without a committed one.
func (in *Ingest) startOffset() int64 {
	if in.opts.Kafka.StartOffset == kafkaconn.StartLatest {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// resolveStarts turns the committed offsets (or kafka.start_offset where
// there is none) into concrete ones. The latest offset is the last stable
// one: a transaction open at the start is read once it commits.
func (in *Ingest) resolveStarts(ctx context.Context, client *kafka.Client, assigned []kafka.PartitionAssignment) (map[int]int64, error) {
	out := make(map[int]int64, len(assigned))
	added, err := in.addedLater(ctx, client, assigned)
	if err != nil {
		return nil, err
	}
	var reqs []kafka.OffsetRequest
	for _, a := range assigned {
		out[a.ID] = a.Offset
		if added[a.ID] {
			in.opts.Log.Info("partition added to the signals topic: read from its start", "partition", a.ID)
			out[a.ID] = kafka.FirstOffset
		}
		switch out[a.ID] {
		case kafka.FirstOffset:
			reqs = append(reqs, kafka.FirstOffsetOf(a.ID))
		case kafka.LastOffset:
			reqs = append(reqs, kafka.LastOffsetOf(a.ID))
		}
	}
	if len(reqs) == 0 {
		return out, nil
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics:         map[string][]kafka.OffsetRequest{in.opts.Kafka.SignalsTopic: reqs},
		IsolationLevel: kafka.ReadCommitted,
	})
	if err != nil {
		return nil, err
	}
	for _, po := range resp.Topics[in.opts.Kafka.SignalsTopic] {
		if po.Error != nil {
			return nil, po.Error
		}
		if out[po.Partition] == kafka.LastOffset {
			out[po.Partition] = po.LastOffset
		} else {
			out[po.Partition] = po.FirstOffset
		}
	}
	return out, nil
}

// addedLater finds, under kafka.start_offset latest, the assigned partitions
// without a committed offset in a group that has committed offsets on other
// partitions of the signals topic: partitions added to the topic after the
// group began, whose heartbeats — those of the devices whose keys moved
// there — must all be read. "latest" is for a new group, to skip a backlog;
// a partition added to a running group is read from its start.
func (in *Ingest) addedLater(ctx context.Context, client *kafka.Client, assigned []kafka.PartitionAssignment) (map[int]bool, error) {
	var fresh []int
	for _, a := range assigned {
		if a.Offset == kafka.LastOffset {
			fresh = append(fresh, a.ID)
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	// Every topic the group committed on (a null topic list).
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: in.opts.Kafka.GroupID})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if !slices.ContainsFunc(resp.Topics[in.opts.Kafka.SignalsTopic], func(p kafka.OffsetFetchPartition) bool {
		return p.Error == nil && p.CommittedOffset >= 0
	}) {
		return nil, nil // a new group: latest it is
	}
	added := make(map[int]bool, len(fresh))
	for _, p := range fresh {
		added[p] = true
	}
	return added, nil
}
