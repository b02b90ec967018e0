-- lease_release.lua: give a lease up, only for its owner.
--
-- KEYS[1]  lease STRING (owner instance id)
-- ARGV[1]  owner id
--
-- Returns 1 when released, 0 when the caller did not own it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
