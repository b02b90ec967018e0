-- classes_register.lua: give each device class a stable small id.
--
-- KEYS[1]  classes HASH ("n:<name>" -> id, "i:<id>" -> name, "next" -> last id)
-- ARGV[1]  the largest id a score can carry
-- ARGV[2 ..]  class names
--
-- Returns the ids, in ARGV order; an error when the id space is exhausted.
local ids = {}
for k = 2, #ARGV do
  local id = redis.call('HGET', KEYS[1], 'n:' .. ARGV[k])
  if not id then
    id = redis.call('HINCRBY', KEYS[1], 'next', 1)
    if id > tonumber(ARGV[1]) then
      return redis.error_reply('class registry full: at most ' .. ARGV[1] .. ' classes')
    end
    redis.call('HSET', KEYS[1], 'n:' .. ARGV[k], id, 'i:' .. id, ARGV[k])
  end
  ids[#ids + 1] = tonumber(id)
end
return ids
