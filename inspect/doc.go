// Package inspect answers an operator's questions from what Redis holds:
// the status document (`flatline shards status`, /status), one device
// (`flatline device get`), the devices down (`flatline devices down`,
// GET /devices/down) and the down counts /metrics exports.
//
// It only reads, through shard.Store, so the read commands can run it with
// a client that loaded no script and may change nothing (CountDown's split
// by class is the one script it calls, and only serve, which loaded the
// scripts, splits). The keys it reads are shard's; the layout it follows
// is rebalance's to change.
package inspect
