-- remove_if.lua: remove members only if their score is unchanged, and hand
-- back their override entries (used when a member moves between shards).
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  overrides HASH of the shard
-- ARGV[1 ..]  member1, score1, member2, score2, ...
--
-- Returns a flat array member1, override1 ('' when none), ... of the members
-- removed.
local out = {}
for k = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[k])
    local o = redis.call('HGET', KEYS[2], ARGV[k])
    if o then
      redis.call('HDEL', KEYS[2], ARGV[k])
    end
    out[#out + 1] = ARGV[k]
    out[#out + 1] = o or ''
  end
end
return out
