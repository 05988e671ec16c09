-- counter.lua: add to or read a string key, renewing its TTL (package
-- region: demand counters and the plan).
--
-- KEYS[1]  the key
-- ARGV[1]  units to add (INCRBY); '' only reads
-- ARGV[2]  TTL to set when the key exists afterwards, ms; '0' leaves it
--
-- Reply: the key's value, or nil when there is none.

if ARGV[1] ~= '' then
  redis.call('INCRBY', KEYS[1], ARGV[1])
end
local v = redis.call('GET', KEYS[1])
if v and ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return v
