-- share_read.lua: read a region's share record, with the clock it is read
-- by (package region).
--
-- KEYS[1]  the region's share record (see share_write.lua), in the
--          region's own Redis
-- ARGV[1]  now, µs since the Unix epoch; '' (always, outside tests) reads
--          Redis TIME, the clock share_write.lua stamps the record with
-- ARGV[2]  TTL to renew the record with, ms: it lives while it is read
--
-- Reply: {now (µs, a string of digits), the record (a string) or nil when
-- there is none}.

local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] .. string.format('%06d', tonumber(t[2]))
end
local v = redis.call('GET', KEYS[1])
if v then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {now, v}
