-- reset.lua: postpone the deadlines of one shard's devices (ZADD GT) and
-- report the devices that come back from a timeout, in one round trip.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  down ZSET of the shard (member -> score of the timeout it fired)
-- KEYS[3]  overrides HASH of the shard (member -> timeout ms)
-- ARGV[1]  n, the number of (score, member) pairs that follow
-- ARGV[2 .. 2n+1]  score1, member1, score2, member2, ...
-- ARGV[2n+2 ..]    override pairs: member, timeout_ms
--
-- Returns a flat array member1, downscore1, member2, downscore2, ... of the
-- members that were down and whose new score is later than the timeout they
-- fired (a replayed older heartbeat is not a recovery); they leave the down set.
local n = tonumber(ARGV[1])
local last = 2 * n + 1
-- unpack is bounded by Lua's C stack: write in chunks of 2000 pairs.
local i = 2
while i <= last do
  local j = math.min(i + 3999, last)
  redis.call('ZADD', KEYS[1], 'GT', unpack(ARGV, i, j))
  i = j + 1
end
for k = last + 1, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[k], ARGV[k + 1])
end
local back = {}
if n > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  for k = 2, last, 2 do
    local down = redis.call('ZSCORE', KEYS[2], ARGV[k + 1])
    if down and tonumber(ARGV[k]) > tonumber(down) then
      redis.call('ZREM', KEYS[2], ARGV[k + 1])
      back[#back + 1] = ARGV[k + 1]
      back[#back + 1] = down
    end
  end
end
return back
