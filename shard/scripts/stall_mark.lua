-- stall_mark.lua: record that a signals partition stalled, and open or widen
-- the hold it belongs to.
--
-- KEYS[1]  watermarks HASH. Fields this script owns beside the watermarks:
--            "stall:<p>" -> "<since_ms>,<cap_ms>,<hwm>,<expired 0|1>"
--            "hold"      -> "<from_ms>,<since_ms>,<hold_id>,<expired 0|1>"
-- ARGV[1]  partition
-- ARGV[2]  since_ms: when the stall was detected
-- ARGV[3]  cap_ms: the partition's watermark stays at or below it
-- ARGV[4]  hwm: the partition's high-water mark; records past it end the stall
-- ARGV[5]  a fresh id, for the hold when none is open
--
-- Returns 1 when the stall was recorded, 0 when it already was (another
-- owner of the partition recorded it first).
local f = 'stall:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], f) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], f, ARGV[2] .. ',' .. ARGV[3] .. ',' .. ARGV[4] .. ',0')
local hold = redis.call('HGET', KEYS[1], 'hold')
if not hold then
  redis.call('HSET', KEYS[1], 'hold', ARGV[3] .. ',' .. ARGV[2] .. ',' .. ARGV[5] .. ',0')
  return 1
end
local from, since, id, expired = string.match(hold, '^([^,]+),([^,]+),([^,]+),([^,]+)$')
if tonumber(ARGV[3]) < tonumber(from) then
  from = ARGV[3]
end
-- A new stall holds again, even in a hold whose other stalls expired.
redis.call('HSET', KEYS[1], 'hold', from .. ',' .. since .. ',' .. id .. ',0')
return 1
