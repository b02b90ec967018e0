-- fired.lua: remove devices whose timeout Kafka acknowledged, each only if
-- its score is still the one the scan read (a reset that raced the timeout
-- keeps its member), and remember them in the down set: for recovered
-- events, to drop replays of heartbeats older than the timeout, and so that
-- during a migration a copy of the device in its other shard knows the
-- silence already fired. Every member is remembered as down, removed or
-- not: its event is out.
--
-- KEYS[1]  deadlines ZSET of the shard
-- KEYS[2]  down ZSET of the shard
-- KEYS[3]  overrides HASH of the shard
-- ARGV[1]  prune: down-set entries scored below this are dropped
-- ARGV[2 ..]  member1, score1, member2, score2, ... as the scan read them
--
-- Returns the number of members removed. A few variadic calls per batch,
-- not a few calls per member.
local n = (#ARGV - 1) / 2
local members = {}
for i = 1, n do
  members[i] = ARGV[2 * i]
end
local cur = {}
for i = 1, n, 4000 do
  local part = redis.call('ZMSCORE', KEYS[1], unpack(members, i, math.min(i + 3999, n)))
  for j = 1, #part do
    cur[i + j - 1] = part[j]
  end
end
local gone, down = {}, {}
for i = 1, n do
  local score = ARGV[2 * i + 1]
  if cur[i] and tonumber(cur[i]) == tonumber(score) then
    gone[#gone + 1] = members[i]
  end
  down[#down + 1] = score
  down[#down + 1] = members[i]
end
-- The override entries go too, flagged or not: a device whose timeout went
-- back to its class's may have left one behind.
for i = 1, #gone, 4000 do
  local part = {unpack(gone, i, math.min(i + 3999, #gone))}
  redis.call('ZREM', KEYS[1], unpack(part))
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('HDEL', KEYS[3], unpack(part))
  end
end
for i = 1, #down, 4000 do
  redis.call('ZADD', KEYS[2], 'GT', unpack(down, i, math.min(i + 3999, #down)))
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
return #gone
