-- down_count.lua: count a chunk of a shard's down set by class id, in
-- Redis, so that only the counts travel. The class id sits in the low bits
-- of each score (see score.go), which no score range can select, and
-- reading the members out would move every device id on each scrape. It
-- writes nothing.
--
-- KEYS[1]  down ZSET of the shard
-- ARGV[1]  start: the lowest score of this chunk, a ZRANGEBYSCORE bound
--          ("-inf", "123" or "(123")
-- ARGV[2]  limit: at most this many members are read (at least 1)
-- ARGV[3]  2^metaBits, ARGV[4] 2^classBits: the score encoding, handed
--          down from Go so it is written once
--
-- Returns {next, id1, n1, id2, n2, ...}: the start of the next chunk ("" when
-- the set is done), then class ids with their counts. A full chunk ends
-- with every member of its last score counted by ZCOUNT (they are all of
-- one class: the class is part of the score), so the next chunk starts past
-- that score with no member counted twice or left out.
local limit = tonumber(ARGV[2])
local metaSpan, classSpan = tonumber(ARGV[3]), tonumber(ARGV[4])
local got = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
local counts = {}
-- Scores are whole numbers below 2^53: exact as Lua numbers.
local function add(score, n)
  local class = score % metaSpan % classSpan
  counts[class] = (counts[class] or 0) + n
end
local next = ''
local last = #got
if #got / 2 == limit then
  local top = got[#got]
  local topN = tonumber(top)
  while last > 0 and tonumber(got[last]) == topN do
    last = last - 2
  end
  add(topN, redis.call('ZCOUNT', KEYS[1], top, top))
  next = '(' .. top
end
for i = 2, last, 2 do
  add(tonumber(got[i]), 1)
end
local out = {next}
for class, n in pairs(counts) do
  out[#out + 1] = class
  out[#out + 1] = n
end
return out
