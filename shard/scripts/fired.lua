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
-- ARGV[2 .. n+1]     member1 .. membern
-- ARGV[n+2 .. 2n+1]  score1 .. scoren, as the scan read them
--
-- A member whose score moved on (a reset raced the timeout: the device beat
-- again after its deadline, or its event could not have fired) stays, is
-- not remembered as down, and is returned so its recovery is reported: the
-- reset ran before it could see a down entry.
--
-- Returns {removed, member1, score1, ...}: the number of members removed,
-- then the raced members with their current scores. A few variadic calls
-- per batch, not a few calls per member; members are passed apart from
-- their scores so the usual case (nothing raced) hands ARGV straight to
-- ZMSCORE and ZREM without copying it into tables first.
local n = (#ARGV - 1) / 2
local cur = {}
for i = 1, n, 4000 do
  local part = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 1 + i, 1 + math.min(i + 3999, n)))
  for j = 1, #part do
    cur[i + j - 1] = part[j]
  end
end
-- gone stays nil while every member so far is unchanged.
local gone = nil
local down, raced = {}, {}
for i = 1, n do
  local member, score, c = ARGV[1 + i], ARGV[1 + n + i], cur[i]
  -- Equal text is the usual case (integer scores print alike); a number
  -- compare decides the rest.
  local same = c and (c == score or tonumber(c) == tonumber(score))
  if not same and not gone then
    gone = {}
    for j = 1, i - 1 do
      gone[j] = ARGV[1 + j]
    end
  elseif same and gone then
    gone[#gone + 1] = member
  end
  if c and not same and tonumber(c) > tonumber(score) then
    raced[#raced + 1] = member
    raced[#raced + 1] = c
  else
    down[#down + 1] = score
    down[#down + 1] = member
  end
end
-- The override entries go too, flagged or not: a device whose timeout went
-- back to its class's may have left one behind.
local overrides = redis.call('EXISTS', KEYS[3]) == 1
local function remove(list, from, to)
  for i = from, to, 4000 do
    local j = math.min(i + 3999, to)
    redis.call('ZREM', KEYS[1], unpack(list, i, j))
    if overrides then
      redis.call('HDEL', KEYS[3], unpack(list, i, j))
    end
  end
end
local removed = n
if gone then
  removed = #gone
  remove(gone, 1, #gone)
else
  remove(ARGV, 2, n + 1)
end
for i = 1, #down, 4000 do
  redis.call('ZADD', KEYS[2], 'GT', unpack(down, i, math.min(i + 3999, #down)))
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local out = {removed}
for i = 1, #raced do
  out[i + 1] = raced[i]
end
return out
