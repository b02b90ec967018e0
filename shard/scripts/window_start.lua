-- window_start.lua: open a maintenance window, unless as many windows as
-- allowed are open already; drop ended windows past their keeping.
--
-- KEYS[1]  windows HASH (id -> window JSON)
-- KEYS[2]  ends ZSET (id -> end ms)
-- KEYS[3]  ended HASH (id -> ended_at_ms)
-- KEYS[4]  version STRING counter
-- ARGV[1]  window id
-- ARGV[2]  window JSON
-- ARGV[3]  until ms
-- ARGV[4]  now ms
-- ARGV[5]  most windows open at once
-- ARGV[6]  windows that ended before this ms are dropped (at most 100 a call)
--
-- Returns {1, open} when started (open: windows open now, this one
-- included), {0, open} when refused for the limit, {-1, 0} when the id is
-- taken.
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[6], 'LIMIT', 0, 100)
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[2], id)
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {-1, 0}
end
local open = redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[4], '+inf')
if open >= tonumber(ARGV[5]) then
  return {0, open}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('INCR', KEYS[4])
return {1, open + 1}
