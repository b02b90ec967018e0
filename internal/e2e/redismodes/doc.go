// Package redismodes holds end-to-end tests of flatline on the Redis
// deployments people run besides a single server:
//
//   - a Redis Cluster (testenv.RedisCluster, 3 masters), with redis.addrs
//     listing its nodes or naming one of them as a managed cluster's
//     configuration endpoint would be named (redis.mode auto then finds
//     cluster mode enabled): every Lua script runs there (each touches one
//     shard's keys, which share the hash tag {i}, or one global key, all
//     passed through KEYS), shards spread over the masters, and the pipeline
//     and a doubling under load give exactly one timeout per silence
//     (cluster_test.go);
//   - a master set watched by Sentinels (testenv.RedisSentinel): with
//     redis.mode sentinel flatline finds the primary through the Sentinels
//     and follows a promoted replica; and the failover of either
//     deployment, a replica lagging behind the primary that is killed, with
//     and without redis.wait_replicas (failover_test.go).
//
// It has no code of its own.
package redismodes
