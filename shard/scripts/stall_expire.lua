-- stall_expire.lua: stalled partitions stop holding firing (storm.max_hold
-- passed, or `flatline storm release`). They stay stalled until records
-- flow again; once every stall of the hold expired, the hold expires too
-- and its deadlines fire.
--
-- Deadlines fired because a hold expired always carry a storm_id: the
-- storm is named (unless one is) in the same step that lifts the hold.
--
-- KEYS[1]  watermarks HASH (fields: see stall_mark.lua and stall_end.lua)
-- ARGV[1]  the id of the storm to name
-- ARGV[2]  now (Unix ms)
-- ARGV[3 ..]  the partitions; none: every stalled partition
--
-- Returns the number of stalls that expired now.
local n = 0
local function expire(f)
  local v = redis.call('HGET', KEYS[1], f)
  if v and string.sub(v, -2) == ',0' then
    redis.call('HSET', KEYS[1], f, string.sub(v, 1, -2) .. '1')
    n = n + 1
  end
end
if #ARGV == 2 then
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.sub(f, 1, 6) == 'stall:' then
      expire(f)
    end
  end
else
  for k = 3, #ARGV do
    expire('stall:' .. ARGV[k])
  end
end
local all = true
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 6) == 'stall:' then
    local v = redis.call('HGET', KEYS[1], f)
    if string.sub(v, -2) == ',0' then
      all = false
    end
  end
end
local hold = redis.call('HGET', KEYS[1], 'hold')
if all and hold and string.sub(hold, -2) == ',0' then
  redis.call('HSET', KEYS[1], 'hold', string.sub(hold, 1, -2) .. '1')
  if redis.call('HEXISTS', KEYS[1], 'storm') == 0 then
    redis.call('HSET', KEYS[1], 'storm', ARGV[1] .. ',' .. ARGV[2] .. ',0')
  end
end
return n
