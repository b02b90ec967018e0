-- down_clear.lua: devices that came back after their timeout leave the down
-- set, each only if its entry is still the timeout the caller saw (it may
-- have fired again meanwhile).
--
-- KEYS[1]  down ZSET of the shard
-- ARGV[1 ..]  member1, downscore1, member2, downscore2, ... as read
--
-- Returns a flat array member1, downscore1, ... of the entries removed:
-- the recoveries to report, each once.
local out = {}
for k = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[k])
    out[#out + 1] = ARGV[k]
    out[#out + 1] = ARGV[k + 1]
  end
end
return out
