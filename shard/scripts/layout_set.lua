-- layout_set.lua: replace the layout if nobody changed it meanwhile.
--
-- KEYS[1]  layout HASH {count, previous, epoch, since_ms}
-- ARGV[1]  the epoch the caller read (0 when no layout exists yet)
-- ARGV[2]  count, ARGV[3] previous, ARGV[4] since_ms
--
-- Returns the new epoch, or 0 when the stored epoch is not ARGV[1].
local cur = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
if cur ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'count', ARGV[2], 'previous', ARGV[3], 'epoch', cur + 1, 'since_ms', ARGV[4])
return cur + 1
