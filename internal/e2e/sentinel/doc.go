// Package sentinel holds end-to-end tests of flatline on a Redis master set
// watched by Sentinels (testenv.RedisSentinel: a primary, a replica and
// three Sentinels): with redis.mode sentinel flatline finds the primary
// through the Sentinels, and after the primary is killed and the replica
// promoted it follows the new primary and keeps detecting silences. It has
// no code of its own.
package sentinel
