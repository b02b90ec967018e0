-- orphan_return.lua: give a child reported unreachable its own timeout
-- again from its parent's return: it is tracked again at that deadline,
-- with its class and override as its timeout fired, unless it beat again
-- meanwhile (it is tracked already). Its down entry stays, so that a
-- heartbeat of it reports its recovery.
--
-- KEYS[1]  deadlines ZSET of the child's shard
-- KEYS[2]  down ZSET of the child's shard
-- KEYS[3]  overrides HASH of the child's shard
-- ARGV[1]  child id
-- ARGV[2]  the new deadline's score without meta (see Score)
-- ARGV[3]  the child's timeout in ms
--
-- Returns 1 when the child was tracked again, else 0.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local down = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not down then
  return 0
end
-- The meta bits (see Score): class id below bit 10, FlagOverride bit 10,
-- FlagPadded bit 11. The new deadline is not padded.
local meta = tonumber(down) % 4096
if meta >= 2048 then
  meta = meta - 2048
end
if meta >= 1024 then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
end
redis.call('ZADD', KEYS[1], 'NX', tonumber(ARGV[2]) + meta, ARGV[1])
return 1
