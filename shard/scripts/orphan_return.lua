-- orphan_return.lua: give a child its own timeout again from its parent's
-- return, when it waits for it: held (re-entered to wait for its silent
-- parent) or reported unreachable (down while its parent was). A child
-- that beat again meanwhile is left as it is.
--
-- KEYS[1]  deadlines ZSET of the child's shard
-- KEYS[2]  down ZSET of the child's shard
-- KEYS[3]  overrides HASH of the child's shard
-- KEYS[4]  holds HASH of the child's shard
-- ARGV[1]  child id
-- ARGV[2]  the parent's return R, in ms since Score's epoch
-- ARGV[3]  the child's timeout in ms
--
-- A held child's hold ends and it is given the deadline R + its timeout,
-- but only when R is a heartbeat of its parent since its own last
-- heartbeat + half its timeout (the hold's condition; an older one, a
-- replay, leaves it to the scanner) and never before its own deadline as
-- written (padded by ingest.coalesce_window: heartbeats within the window
-- were covered by it). An unreachable child is tracked again at that
-- deadline, with its class and override as its timeout fired; its down
-- entry stays, so that a heartbeat of it reports its recovery.
--
-- Scores (see Score): (ms since the epoch) * 4096 + meta; meta: class id
-- below bit 10, FlagOverride bit 10, FlagPadded bit 11.
--
-- Returns 1 when the child was given its own timeout again, else 0.
local r, timeout = tonumber(ARGV[2]), tonumber(ARGV[3])
local function unpadded(score)
  local meta = score % 4096
  if meta >= 2048 then
    meta = meta - 2048
  end
  return meta
end

local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if cur then
  local hold = redis.call('HGET', KEYS[4], ARGV[1])
  if not hold then
    return 0
  end
  local orig, at = string.match(hold, '^(%d+):(%d+)$')
  if not orig or tonumber(at) ~= tonumber(cur) then
    return 0 -- a heartbeat ended the hold
  end
  orig = tonumber(orig)
  local origMs = math.floor(orig / 4096)
  if r < origMs - timeout / 2 then
    return 0
  end
  local ms = r + timeout
  if orig % 4096 >= 2048 and ms < origMs then
    ms = origMs
  end
  redis.call('ZADD', KEYS[1], 'XX', ms * 4096 + unpadded(orig), ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  return 1
end

local down = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not down then
  return 0
end
local meta = unpadded(tonumber(down))
if meta >= 1024 then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
end
redis.call('ZADD', KEYS[1], 'NX', (r + timeout) * 4096 + meta, ARGV[1])
return 1
