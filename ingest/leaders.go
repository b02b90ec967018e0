package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flatline-dev/flatline/internal/kfetch"
	"github.com/flatline-dev/flatline/internal/retry"
)

// router hands each partition of a generation to the reader of the broker
// that leads it (fetch.go), starting a reader per broker as it first needs
// one, and takes back the partitions a reader could not fetch (their leader
// moved, their broker went away) to route them again once their backoff
// has passed, asking the brokers for the leaders afresh each time. It owns
// the readers: it waits for them before it returns.
type router struct {
	in     *Ingest
	dialer *kafka.Dialer
	out    chan<- chunk
	guard  *stallGuard

	readers   map[string]*brokerReader // by broker address
	running   sync.WaitGroup
	displaced chan *partitionFetch
	// pending are the partitions waiting for a leader, each from its
	// retryAt.
	pending []*partitionFetch
	// backoff spaces the leader look-ups that failed; outage logs them.
	backoff retry.Backoff
	outage  retry.Outage
	// routed, when set (tests), is called after each round of routing.
	routed func()
}

// leaderTimeout bounds one look-up of the leaders.
const leaderTimeout = 5 * time.Second

func (in *Ingest) newRouter(dialer *kafka.Dialer, parts []*partitionFetch, out chan<- chunk, guard *stallGuard) *router {
	return &router{
		in: in, dialer: dialer, out: out, guard: guard,
		readers: make(map[string]*brokerReader),
		// Room for every partition: a reader never waits to hand one back.
		displaced: make(chan *partitionFetch, len(parts)),
		pending:   parts,
		backoff:   retry.Backoff{Min: 10 * time.Millisecond, Max: time.Second},
		outage:    retry.Outage{Log: in.opts.Log, Down: "cannot look up the signals topic's leaders, retrying", Up: "leaders found"},
	}
}

// run routes until ctx ends, then waits for the readers.
func (rt *router) run(ctx context.Context) {
	defer rt.running.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if len(rt.pending) > 0 {
			timer.Reset(time.Until(rt.due()))
		}
		select {
		case <-ctx.Done():
			return
		case p := <-rt.displaced:
			rt.pending = append(rt.pending, p)
			continue
		case <-timer.C:
		}
		if len(rt.pending) > 0 && !time.Now().Before(rt.due()) {
			rt.route(ctx)
		}
	}
}

// due is the earliest retryAt of the pending partitions.
func (rt *router) due() time.Time {
	at := rt.pending[0].retryAt
	for _, p := range rt.pending[1:] {
		if p.retryAt.Before(at) {
			at = p.retryAt
		}
	}
	return at
}

// route asks the brokers for the leaders and hands every pending partition
// whose retryAt has passed to its leader's reader. A partition without a
// leader just now waits its own backoff; when the brokers cannot be asked,
// every one of them waits the router's.
func (rt *router) route(ctx context.Context) {
	k := rt.in.opts.Kafka
	lctx, cancel := context.WithTimeout(ctx, leaderTimeout)
	leaders, err := kfetch.Leaders(lctx, rt.dialer, k.Brokers, k.SignalsTopic)
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	if err != nil {
		rt.in.opts.Metrics.FetchErrors.Inc()
		rt.outage.Failed(err)
		next := now.Add(rt.backoff.Next())
		for _, p := range rt.pending {
			if p.retryAt.Before(next) {
				p.retryAt = next
			}
		}
		return
	}
	rt.outage.Succeeded()
	rt.backoff.Reset()
	waiting := rt.pending[:0]
	for _, p := range rt.pending {
		addr, ok := leaders[p.partition]
		switch {
		case now.Before(p.retryAt):
			waiting = append(waiting, p)
		case !ok:
			p.outage.Failed(kafka.LeaderNotAvailable, "partition", p.partition)
			p.retryAt = now.Add(p.backoff.Next())
			waiting = append(waiting, p)
		default:
			rt.reader(ctx, addr).inbox <- p // never waits: room for every partition
		}
	}
	clear(rt.pending[len(waiting):])
	rt.pending = waiting
	if rt.routed != nil {
		rt.routed()
	}
}

// reader returns the reader of the broker at addr, started on first use.
func (rt *router) reader(ctx context.Context, addr string) *brokerReader {
	if r, ok := rt.readers[addr]; ok {
		return r
	}
	r := &brokerReader{
		in: rt.in, dialer: rt.dialer, addr: addr, out: rt.out, guard: rt.guard,
		inbox: make(chan *partitionFetch, cap(rt.displaced)), displaced: rt.displaced,
		grace:   fetchGrace,
		backoff: retry.Backoff{Min: 10 * time.Millisecond, Max: time.Second},
		outage:  retry.Outage{Log: rt.in.opts.Log, Down: "fetch failing, retrying with backoff", Up: "fetch resumed"},
	}
	rt.readers[addr] = r
	rt.running.Go(func() { r.run(ctx) })
	return r
}
