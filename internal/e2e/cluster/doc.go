// Package cluster holds end-to-end tests of flatline on a Redis Cluster: a
// local 3-master cluster (testenv.RedisCluster) with redis.addrs listing the
// three nodes, so internal/redisconn builds a ClusterClient, or naming one
// of them as a managed cluster's configuration endpoint would be named
// (redis.mode auto then finds cluster mode enabled). They show that
// every Lua script runs there (each touches one shard's keys, which share the
// hash tag {i}, or one global key, all passed through KEYS), that shards
// spread over the masters, and that the pipeline and a doubling under load
// give exactly one timeout per silence. It has no code of its own.
package cluster
