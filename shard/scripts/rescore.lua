-- rescore.lua: give members a new score, each only if its score is
-- unchanged (a heartbeat that arrived meanwhile already moved it on: ZADD
-- GT), and set or end its hold (see Keys.holds). The new score may be
-- earlier than the current one: a held child is put back at its own
-- deadline to fire, or given its own timeout from its parent's return.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  holds HASH of the shard
-- ARGV[1 ..]  quads: member, old score, new score, hold ('' ends the
--             member's hold, else "<original score>:<held score>")
--
-- Returns one number per member: 1 when it was rescored, else 0.
local out = {}
for k = 1, #ARGV, 4 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[k])
  if cur and tonumber(cur) == tonumber(ARGV[k + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[k + 2], ARGV[k])
    if ARGV[k + 3] == '' then
      redis.call('HDEL', KEYS[2], ARGV[k])
    else
      redis.call('HSET', KEYS[2], ARGV[k], ARGV[k + 3])
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
