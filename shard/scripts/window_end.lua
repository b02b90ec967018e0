-- window_end.lua: end an open maintenance window now.
--
-- KEYS[1]  windows HASH (id -> window JSON)
-- KEYS[2]  ends ZSET (id -> end ms)
-- KEYS[3]  ended HASH (id -> ended_at_ms)
-- KEYS[4]  version STRING counter
-- ARGV[1]  window id
-- ARGV[2]  now ms
--
-- Returns {1, json} when ended, {0, json} when it had ended already, {-1}
-- when there is no such window.
local w = redis.call('HGET', KEYS[1], ARGV[1])
if not w then
  return {-1}
end
local e = redis.call('ZSCORE', KEYS[2], ARGV[1])
if e and tonumber(e) <= tonumber(ARGV[2]) then
  return {0, w}
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[4])
return {1, w}
