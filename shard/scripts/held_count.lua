-- held_count.lua: count, per window, the devices of a shard that a
-- maintenance window holds now: records of stage "p" whose device still
-- has the score the record names. Reads only.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  held HASH of the shard
--
-- Returns {window id1, count1, window id2, ...}. Its work is the size of
-- the shard's held hash: it runs for /status and scrapes, not per event.
local counts = {}
local all = redis.call('HGETALL', KEYS[2])
for k = 1, #all, 2 do
  local stage, score, _, wid = string.match(all[k + 1], '^(%a)|([^|]*)|([^|]*)|(.*)$')
  if stage == 'p' then
    local cur = redis.call('ZSCORE', KEYS[1], all[k])
    if cur and tonumber(cur) == tonumber(score) then
      counts[wid] = (counts[wid] or 0) + 1
    end
  end
end
local out = {}
for wid, n in pairs(counts) do
  out[#out + 1] = wid
  out[#out + 1] = n
end
return out
