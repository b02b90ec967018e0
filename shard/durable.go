package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability is what the writes of Write and WriteAfter must reach before
// they count as written (redis.wait_replicas, redis.wait_timeout). The zero
// Durability takes the master's reply.
type Durability struct {
	// Replicas of every master a write went to that must confirm it.
	Replicas int
	// Timeout bounds one WAIT.
	Timeout time.Duration
}

// ErrNotReplicated means WAIT found fewer replicas than Durability.Replicas
// confirming a write within Durability.Timeout. The write is on the master
// and may or may not survive a failover: the remedy is to write it again
// (its commands are idempotent) and wait again.
var ErrNotReplicated = errors.New("not confirmed by enough replicas")

// How a write is confirmed.
//
// WAIT counts the replicas that acknowledged the replication offset of the
// calling connection as it stood right after that connection's last command
// that entered the replication stream (Redis 7.2 and later, src/server.c,
// call(): "Remember the replication offset of the client, right after its
// last command that resulted in propagation", c->woff =
// server.master_repl_offset; before 7.2, after any command of the
// connection; src/replication.c, waitCommand counts the acks of c->woff).
// Hence:
//
//   - WAIT runs on the connection that sent the writes, in the same pipeline,
//     after them. A go-redis Client (standalone, or Sentinel's failover
//     client) runs one pipeline on one connection, so the writes, an INCR of
//     a Sync key and WAIT go there in that order. A ClusterClient would send
//     a keyless WAIT to a random node; in a cluster each master's share of
//     the writes therefore goes in a pipeline of its own on that master's
//     client (ClusterClient.MasterForKey), ending in its INCR and WAIT.
//   - The INCR: a command that changes nothing is not replicated and, from
//     Redis 7.2 on, leaves the connection's offset where it was. A batch written again after a
//     WAIT that failed often changes nothing (its ZADD GT finds the
//     deadlines already there), and a fresh connection's offset is 0, for
//     which WAIT answers at once. The INCR always enters the stream, so the
//     offset WAIT waits for covers everything the master held when it ran,
//     the writes of earlier attempts included.
//   - Not an INCR and WAIT sent after the batch's pipeline, on another
//     connection: a failover between the two sends them to the new master,
//     which may never have had the batch, and WAIT there would confirm what
//     it lacks. On the writes' own connection a master that lost its role
//     answers the writes with an error (MOVED, READONLY), or WAIT with its
//     replicas gone, never with a confirmation of writes it did not take.
//
// Only ingest's writes wait. A timeout's removal (Fired) that a failover
// loses brings the member back with its old score, so it fires again with
// the same event_id: the duplicate the contract allows, never a loss. A lost
// watermark raise moves the watermark back, which holds firing back rather
// than firing early; a lost lease is taken again.

// writeShards runs what fill queues for each of shards, and with
// Durability.Replicas > 0 returns nil only once WAIT confirmed it on every
// master it went to. fill queues shard i's commands on local, which holds
// only keys of shard i's slot, and commands on keys of other slots on
// elsewhere.
// The pipelines are filled one after the other, so fill needs no lock.
func (s *Store) writeShards(ctx context.Context, shards []int, fill func(local, elsewhere redis.Pipeliner, i int)) error {
	if len(shards) == 0 {
		return nil
	}
	cc, cluster := s.rdb.(*redis.ClusterClient)
	if s.dur.Replicas == 0 || !cluster {
		p := s.rdb.Pipeline()
		for _, i := range shards {
			fill(p, p, i)
		}
		return s.execDurable(ctx, s.rdb, p, shards[0])
	}
	type master struct {
		client *redis.Client
		p      redis.Pipeliner
		shard  int // whose Sync key it increments
	}
	var masters []*master
	byClient := make(map[*redis.Client]*master)
	elsewhere := cc.Pipeline()
	for _, i := range shards {
		c, err := cc.MasterForKey(ctx, s.keys.Deadlines(i))
		if err != nil {
			return err
		}
		m := byClient[c]
		if m == nil {
			m = &master{client: c, p: c.Pipeline(), shard: i}
			byClient[c] = m
			masters = append(masters, m)
		}
		fill(m.p, elsewhere, i)
	}
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	for k, m := range masters {
		wg.Go(func() { errs[k] = s.execDurable(ctx, m.client, m.p, m.shard) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// A master that failed may have lost its slots (a failover): the
		// next attempt routes by a fresh slot map.
		cc.ReloadState(ctx)
		return err
	}
	if elsewhere.Len() == 0 {
		return nil
	}
	_, err := s.exec(ctx, s.rdb, elsewhere, nil)
	return err
}

// execDurable runs the filled pipeline p of client c and, with
// Durability.Replicas > 0, ends it with an INCR of shard's Sync key and
// WAIT, returning ErrNotReplicated when too few replicas confirmed.
func (s *Store) execDurable(ctx context.Context, c redis.UniversalClient, p redis.Pipeliner, shard int) error {
	if s.dur.Replicas == 0 {
		_, err := s.exec(ctx, c, p, nil)
		return err
	}
	var wait *redis.IntCmd
	_, err := s.exec(ctx, c, p, func(p redis.Pipeliner) {
		p.Incr(ctx, s.keys.sync(shard))
		wait = redis.NewIntCmd(ctx, "wait", s.dur.Replicas, max(s.dur.Timeout.Milliseconds(), 1)) // 0 would wait forever
		_ = p.Process(ctx, wait)
	})
	if err != nil {
		return err
	}
	n, err := wait.Result()
	if err != nil {
		return err
	}
	if n < int64(s.dur.Replicas) {
		where := ""
		if rc, ok := c.(*redis.Client); ok {
			where = " on " + rc.Options().Addr
		}
		return fmt.Errorf("%w: WAIT %d %v%s: %d confirmed", ErrNotReplicated, s.dur.Replicas, s.dur.Timeout, where, n)
	}
	return nil
}
