-- lease_renew.lua: extend a lease, only for its owner.
--
-- KEYS[1]  lease STRING (owner instance id)
-- ARGV[1]  owner id
-- ARGV[2]  ttl in ms
--
-- Returns 1 when renewed, 0 when the caller does not own the lease.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
