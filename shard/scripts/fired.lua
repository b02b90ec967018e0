-- fired.lua: remove devices whose timeout Kafka acknowledged, each only if
-- its score is still the one the scan read (a reset that raced the timeout
-- keeps its member), and remember them in the down set: for recovered
-- events, to drop replays of heartbeats older than the timeout, and so that
-- during a migration a copy of the device in its other shard knows the
-- silence already fired.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  down ZSET of the shard
-- KEYS[3]  overrides HASH of the shard
-- ARGV[1]  prune: down-set entries scored below this are dropped
-- ARGV[2 ..]  member1, score1, member2, score2, ... as the scan read them
--
-- Every member is remembered as down, removed or not: its event is out.
--
-- Returns the number of members removed.
local removed = 0
for k = 2, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[k])
    redis.call('HDEL', KEYS[3], ARGV[k])
    removed = removed + 1
  end
  redis.call('ZADD', KEYS[2], 'GT', ARGV[k + 1], ARGV[k])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
return removed
