-- stall_end.lua: records flow again on a stalled partition. When it was the
-- last stalled one, the hold ends: it is kept as "held:<hold_id>" so that
-- the scanners give the devices whose deadlines fell inside it their own
-- timeout again from its end (unless the hold expired: its deadlines
-- fired). A hold that lasted long enough to hold a deadline back is a
-- storm: one is named, unless one is already, before any of its deadlines
-- can fire.
--
-- KEYS[1]  watermarks HASH (fields: see stall_mark.lua), plus
--            "held:<hold_id>" -> "<from_ms>,<end_ms>"
--            "storm"          -> "<storm_id>,<started_ms>,<announced 0|1>"
-- ARGV[1]  partition
-- ARGV[2]  end_ms: when records were seen flowing again
-- ARGV[3]  ended holds whose end is before this (Unix ms) are dropped
-- ARGV[4]  a hold at least this long (ms, from its first detection) names a storm
-- ARGV[5]  the id of that storm
--
-- Returns 0 when the partition was not stalled, 1 when the hold goes on,
-- 2 when the hold ended.
if redis.call('HDEL', KEYS[1], 'stall:' .. ARGV[1]) == 0 then
  return 0
end
local fields = redis.call('HKEYS', KEYS[1])
for _, f in ipairs(fields) do
  if string.sub(f, 1, 6) == 'stall:' then
    return 1
  end
end
for _, f in ipairs(fields) do
  if string.sub(f, 1, 5) == 'held:' then
    local v = redis.call('HGET', KEYS[1], f)
    local e = string.match(v, ',([^,]+)$')
    if e and tonumber(e) < tonumber(ARGV[3]) then
      redis.call('HDEL', KEYS[1], f)
    end
  end
end
local hold = redis.call('HGET', KEYS[1], 'hold')
if not hold then
  return 2
end
redis.call('HDEL', KEYS[1], 'hold')
local from, since, id, expired = string.match(hold, '^([^,]+),([^,]+),([^,]+),([^,]+)$')
if expired == '0' then
  redis.call('HSET', KEYS[1], 'held:' .. id, from .. ',' .. ARGV[2])
  if tonumber(ARGV[2]) - tonumber(since) >= tonumber(ARGV[4]) and redis.call('HEXISTS', KEYS[1], 'storm') == 0 then
    redis.call('HSET', KEYS[1], 'storm', ARGV[5] .. ',' .. ARGV[2] .. ',0')
  end
end
return 2
