-- held_move.lua: move devices a maintenance window holds (or releases) to
-- a new deadline and record why, only where their score is unchanged: a
-- heartbeat that arrived meanwhile moved the device on, and it is no
-- longer held.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  held HASH of the shard
-- ARGV[1 ..]  member1, old score1, new score1, record1, member2, ...
--
-- The new score may be earlier than the old one: `maintenance end` brings
-- a held device's deadline back from the window's planned end.
--
-- Returns the number of members moved.
local n = 0
for k = 1, #ARGV, 4 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[k + 2], ARGV[k])
    redis.call('HSET', KEYS[2], ARGV[k], ARGV[k + 3])
    n = n + 1
  end
end
return n
