-- storm_name.lua: name a storm, mark it announced, or end it.
--
-- KEYS[1]  watermarks HASH (field "storm" -> "<storm_id>,<started_ms>,<announced 0|1>")
-- ARGV[1]  "start", "announced" or "end"
-- ARGV[2]  start: the new storm id; announced, end: the storm's id
-- ARGV[3]  start: started_ms
--
-- Returns the storm named after the call ("start": the one already named,
-- if any, wins), or false when none.
local cur = redis.call('HGET', KEYS[1], 'storm')
if ARGV[1] == 'start' then
  if cur then
    return cur
  end
  local v = ARGV[2] .. ',' .. ARGV[3] .. ',0'
  redis.call('HSET', KEYS[1], 'storm', v)
  return v
end
if not cur or string.match(cur, '^([^,]+)') ~= ARGV[2] then
  return cur
end
if ARGV[1] == 'announced' then
  cur = string.sub(cur, 1, -2) .. '1'
  redis.call('HSET', KEYS[1], 'storm', cur)
  return cur
end
redis.call('HDEL', KEYS[1], 'storm')
return false
