-- held_prune.lua: drop the held records that no longer stand: the device's
-- score is not the one its record names (a heartbeat moved it on, it
-- fired and left the shard, or it was deregistered).
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  held HASH of the shard
-- ARGV[1 ..]  member1, member2, ...: the members to look at
--
-- Returns the number of records dropped. The check is redone here, so a
-- record written since the caller read it (a device held again) stays.
local n = 0
for _, m in ipairs(ARGV) do
  local rec = redis.call('HGET', KEYS[2], m)
  if rec then
    local score = string.match(rec, '^%a|([^|]*)|')
    local cur = redis.call('ZSCORE', KEYS[1], m)
    if not cur or not score or tonumber(cur) ~= tonumber(score) then
      redis.call('HDEL', KEYS[2], m)
      n = n + 1
    end
  end
end
return n
