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
-- ARGV[2]  n, the number of members
-- ARGV[3 .. n+2]  member1 .. membern
-- then pairs (score, count): the scores the scan read, run by run: the
-- first count members were read at score, the next run's at its score, …
--
-- A member whose score moved on (a reset raced the timeout: the device beat
-- again after its deadline, or its event could not have fired) stays, is
-- not remembered as down, and is returned so its recovery is reported: the
-- reset ran before it could see a down entry.
--
-- Returns {removed, member1, score1, ...}: the number of members removed,
-- then the raced members with their current scores. A few variadic calls
-- per batch, not a few calls per member.
--
-- A run of members fired at one score (a shared deadline: devices whose
-- clocks send whole seconds, a burst replayed, a mass expiry) is checked by
-- rank, without reading a score: Redis 7.0 prints every score it returns
-- with printf, most of a ZMSCORE's cost. The run is unchanged if the ranks
-- from its first member's hold exactly its members, in order, and those
-- ranks lie within the ranks of its score (the members below it come first,
-- then those at it). Every other run is read with ZMSCORE.
local n = tonumber(ARGV[2])
local RUN = 8
local runs = {} -- {score, first, last} per run
local checked = true -- every run so far checked by rank
local i = 1
for a = 3 + n, #ARGV, 2 do
  local s, k = ARGV[a], tonumber(ARGV[a + 1])
  local run = {s, i, i + k - 1}
  runs[#runs + 1] = run
  local same = false
  if k >= RUN then
    local r = redis.call('ZRANK', KEYS[1], ARGV[2 + i])
    if r then
      local names = redis.call('ZRANGE', KEYS[1], r, r + k - 1)
      same = #names == k
      for t = 1, k do
        if not same then
          break
        end
        same = names[t] == ARGV[1 + i + t]
      end
      if same then
        local below = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. s)
        local at = redis.call('ZCOUNT', KEYS[1], s, s)
        same = r >= below and r + k <= below + at
      end
    end
  end
  run[4] = same
  checked = checked and same
  i = i + k
end

local removed, down, raced = n, {}, {}
local gone = nil -- the members to remove, when not all of ARGV's
if checked then
  -- The usual case: every member unchanged, none raced.
  local d = 0
  for _, run in ipairs(runs) do
    for t = run[2], run[3] do
      down[d + 1] = run[1]
      down[d + 2] = ARGV[2 + t]
      d = d + 2
    end
  end
else
  -- cur[i]: member i's score now, as text, or false when it is not tracked.
  local cur, scores, rest = {}, {}, {}
  for _, run in ipairs(runs) do
    for t = run[2], run[3] do
      scores[t] = run[1]
      if run[4] then
        cur[t] = run[1]
      else
        rest[#rest + 1] = t
      end
    end
  end
  for from = 1, #rest, 4000 do
    local ids = {}
    for t = from, math.min(from + 3999, #rest) do
      ids[#ids + 1] = ARGV[2 + rest[t]]
    end
    local part = redis.call('ZMSCORE', KEYS[1], unpack(ids))
    for t = 1, #ids do
      cur[rest[from + t - 1]] = part[t]
    end
  end
  gone = {}
  for t = 1, n do
    local member, score, c = ARGV[2 + t], scores[t], cur[t]
    -- Equal text is the usual case (integer scores print alike); a number
    -- compare decides the rest.
    local same = c and (c == score or tonumber(c) == tonumber(score))
    if same then
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
  removed = #gone
end
-- The override entries go too, flagged or not: a device whose timeout went
-- back to its class's may have left one behind.
local overrides = redis.call('EXISTS', KEYS[3]) == 1
local function remove(list, from, to)
  for f = from, to, 4000 do
    local j = math.min(f + 3999, to)
    redis.call('ZREM', KEYS[1], unpack(list, f, j))
    if overrides then
      redis.call('HDEL', KEYS[3], unpack(list, f, j))
    end
  end
end
if gone then
  if #gone > 0 then
    remove(gone, 1, #gone)
  end
else
  remove(ARGV, 3, n + 2)
end
for f = 1, #down, 4000 do
  redis.call('ZADD', KEYS[2], 'GT', unpack(down, f, math.min(f + 3999, #down)))
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
local out = {removed}
for t = 1, #raced do
  out[t + 1] = raced[t]
end
return out
