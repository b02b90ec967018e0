-- watermark_raise.lua: move per-partition watermarks forward, never back.
--
-- KEYS[1]  watermarks HASH (partition -> Unix ms, "partitions" -> count)
-- ARGV[1]  the signals topic's partition count ("0": leave it)
-- ARGV[2 ..]  partition1, ms1, partition2, ms2, ...
--
-- Returns the number of watermarks raised.
if ARGV[1] ~= '0' then
  redis.call('HSET', KEYS[1], 'partitions', ARGV[1])
end
local raised = 0
for k = 2, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[k])
  if not cur or tonumber(ARGV[k + 1]) > tonumber(cur) then
    redis.call('HSET', KEYS[1], ARGV[k], ARGV[k + 1])
    raised = raised + 1
  end
end
return raised
