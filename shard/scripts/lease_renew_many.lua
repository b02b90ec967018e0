-- lease_renew_many.lua: extend many leases, each only for its owner.
--
-- KEYS     lease STRINGs (owner instance id), all of one server: a standalone
--          Redis, never across Redis Cluster slots
-- ARGV[1]  owner id
-- ARGV[2]  ttl in ms
--
-- Returns an array with, per key, 1 when renewed, 0 when the caller does not
-- own the lease. The caller bounds the keys per call.
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    out[i] = redis.call('PEXPIRE', key, ARGV[2])
  else
    out[i] = 0
  end
end
return out
