-- reenter.lua: give members whose deadline fell inside a hold a new
-- deadline, only if their score is unchanged (a heartbeat that arrived
-- meanwhile already postponed them further: ZADD GT).
--
-- KEYS[1]  deadlines ZSET of the shard
-- ARGV[1 ..]  member1, old score1, new score1, member2, ...
--
-- Returns the number of members moved.
local n = 0
for k = 1, #ARGV, 3 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[k + 2], ARGV[k])
    n = n + 1
  end
end
return n
