-- watermark_raise.lua: move per-partition watermarks forward, never back.
--
-- KEYS[1]  watermarks HASH (partition -> Unix ms, "partitions" -> count)
-- ARGV[1]  the signals topic's partition count ("0": leave it). The count
--          only grows: Kafka only adds partitions, and a prober that has not
--          yet seen new ones must not take them from the firing gate.
-- ARGV[2 ..]  partition1, ms1, partition2, ms2, ...
--
-- Returns the number of watermarks raised.
if ARGV[1] ~= '0' then
  local n = redis.call('HGET', KEYS[1], 'partitions')
  if not n or tonumber(ARGV[1]) > tonumber(n) then
    redis.call('HSET', KEYS[1], 'partitions', ARGV[1])
  end
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
