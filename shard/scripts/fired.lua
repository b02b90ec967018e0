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
-- cur[i]: member i's score now, as text, or nil when it is not tracked.
local cur = {}
-- A run of members fired at one score (a shared deadline: devices whose
-- clocks send whole seconds, a burst replayed, a mass expiry) is checked
-- by rank, without reading a score: Redis 7.0 prints every score it
-- returns with printf, most of a ZMSCORE's cost. The run is unchanged if
-- the ranks from its first member's hold exactly its members, in order,
-- and those ranks lie within the ranks of score s (the members below s
-- come first, then those at s). Anything else, and every short run, is
-- read with ZMSCORE.
local RUN = 8
local rest = {} -- indexes of members whose score is read
local i = 1
while i <= n do
  local s = ARGV[1 + n + i]
  local j = i
  while j < n and ARGV[2 + n + j] == s do
    j = j + 1
  end
  local k, same = j - i + 1, false
  if k >= RUN then
    local r = redis.call('ZRANK', KEYS[1], ARGV[1 + i])
    if r then
      local names = redis.call('ZRANGE', KEYS[1], r, r + k - 1)
      same = #names == k
      for t = 1, k do
        if not same then
          break
        end
        same = names[t] == ARGV[i + t]
      end
      if same then
        local below = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. s)
        local at = redis.call('ZCOUNT', KEYS[1], s, s)
        same = r >= below and r + k <= below + at
      end
    end
  end
  for t = i, j do
    if same then
      cur[t] = s
    else
      rest[#rest + 1] = t
    end
  end
  i = j + 1
end
for from = 1, #rest, 4000 do
  local ids = {}
  for t = from, math.min(from + 3999, #rest) do
    ids[#ids + 1] = ARGV[1 + rest[t]]
  end
  local part = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  for t = 1, #ids do
    cur[rest[from + t - 1]] = part[t]
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
