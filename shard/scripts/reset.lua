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
-- A down device whose new score is later than the timeout it fired has
-- recovered: it leaves the down set and is tracked again. A heartbeat not
-- later than that timeout is a replay of the past and is dropped, so it can
-- neither fire the same silence twice nor count as a recovery.
--
-- Returns a flat array member1, downscore1, ... of the recovered devices.
local n = tonumber(ARGV[1])
local last = 2 * n + 1
local back = {}
local pairs_ = ARGV
local from, to = 2, last
if n > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  local members = {}
  for k = 2, last, 2 do
    members[#members + 1] = ARGV[k + 1]
  end
  local downs = {}
  for i = 1, #members, 4000 do
    local part = redis.call('ZMSCORE', KEYS[2], unpack(members, i, math.min(i + 3999, #members)))
    for j = 1, #part do
      downs[i + j - 1] = part[j]
    end
  end
  local kept = {}
  for i = 1, #members do
    local score = ARGV[2 * i]
    local down = downs[i]
    if not down then
      kept[#kept + 1] = score
      kept[#kept + 1] = members[i]
    elseif tonumber(score) > tonumber(down) then
      redis.call('ZREM', KEYS[2], members[i])
      back[#back + 1] = members[i]
      back[#back + 1] = down
      kept[#kept + 1] = score
      kept[#kept + 1] = members[i]
    end
  end
  pairs_, from, to = kept, 1, #kept
end
-- unpack is bounded by Lua's C stack: write in chunks of 2000 pairs.
local i = from
while i <= to do
  local j = math.min(i + 3999, to)
  redis.call('ZADD', KEYS[1], 'GT', unpack(pairs_, i, j))
  i = j + 1
end
for k = last + 1, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[k], ARGV[k + 1])
end
return back
