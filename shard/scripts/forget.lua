-- forget.lua: stop tracking devices (a Kafka tombstone deregisters them).
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  down ZSET of the shard
-- KEYS[3]  overrides HASH of the shard
-- KEYS[4]  holds HASH of the shard
-- ARGV[1 ..]  device ids
--
-- Returns the number of devices that were tracked.
local n = 0
for k = 1, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[k])
  redis.call('ZREM', KEYS[2], ARGV[k])
  redis.call('HDEL', KEYS[3], ARGV[k])
  redis.call('HDEL', KEYS[4], ARGV[k])
end
return n
