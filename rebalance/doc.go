// Package rebalance owns the shard layout {count, previous, epoch, since}.
//
// It is the only writer of the layout: Init stores the initial count on a
// fresh deployment, Scale starts a doubling (or halving), and the sweeper
// finalizes it once no member is misplaced. Every instance runs a Watcher that
// re-reads the layout every shards.poll_interval, so a change reaches all
// ingest and scanner instances within a second without a restart. Ingest
// routes each batch by one layout snapshot, so no batch is half-switched.
package rebalance
