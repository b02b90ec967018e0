-- storm_name.lua: name a storm, or end the named one.
--
-- KEYS[1]  watermarks HASH (field "storm" -> "<storm_id>,<started_ms>")
-- ARGV[1]  "start" or "end"
-- ARGV[2]  start: the new storm id; end: the id of the storm to end
-- ARGV[3]  start: started_ms
--
-- Returns the current storm's "<storm_id>,<started_ms>" after the call
-- (start: the one already named, if any, wins), or false when none.
local cur = redis.call('HGET', KEYS[1], 'storm')
if ARGV[1] == 'start' then
  if cur then
    return cur
  end
  local v = ARGV[2] .. ',' .. ARGV[3]
  redis.call('HSET', KEYS[1], 'storm', v)
  return v
end
if cur and string.match(cur, '^([^,]+)') == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'storm')
  return false
end
return cur
