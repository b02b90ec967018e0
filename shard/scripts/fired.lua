-- fired.lua: remove devices whose timeout Kafka acknowledged, each only if
-- its score is still the one the scan read (a reset that raced the timeout
-- keeps its member), and remember them as down for recovery detection.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  down ZSET of the shard
-- KEYS[3]  overrides HASH of the shard
-- ARGV[1]  "1" to add fired devices to the down set, "0" not to
-- ARGV[2]  prune: down-set entries scored below this are dropped ("-inf": none)
-- ARGV[3 ..]  member1, score1, member2, score2, ... as the scan read them
--
-- Returns the number of members removed.
local removed = 0
for k = 3, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[k])
    redis.call('HDEL', KEYS[3], ARGV[k])
    if ARGV[1] == '1' then
      redis.call('ZADD', KEYS[2], ARGV[k + 1], ARGV[k])
    end
    removed = removed + 1
  end
end
if ARGV[2] ~= '-inf' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2])
end
return removed
