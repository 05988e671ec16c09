-- share_write.lua: write one epoch of the plan into a region's share record
-- (package region). Writes are ordered by epoch: a record never goes back.
--
-- KEYS[1]  the region's share record, in the region's own Redis
-- ARGV[1]  now, µs since the Unix epoch; '' (always, outside tests) reads
--          Redis TIME
-- ARGV[2]  epoch of the plan, an integer >= 0
-- ARGV[3]  the region's share in that plan, ppm
-- ARGV[4]  the region's floor, ppm: the share a missing record stands for
-- ARGV[5]  'shrink': write only when the share does not grow (is at most
--          the record's current share, or the floor when there is no
--          record); 'any': write it whatever it is
-- ARGV[6]  keep, µs: an older entry is kept while a reader looking back
--          this far from now may need it
-- ARGV[7]  TTL of the record, ms
-- ARGV[8]  the most entries a record keeps
--
-- Reply: 1 written; 0 the record holds this epoch or a later one already
-- (nothing written); 2 in 'shrink' mode, the share would grow (nothing
-- written).
--
-- Record: '<epoch> <at> <share> <at> <share> …', entries newest first, at
-- the µs (this Redis's clock) each share was written. A write of epoch e
-- over epoch e-1 keeps the older entries up to and including the first
-- written at or before now - keep; over anything else (no record, an older
-- epoch, a record that does not parse) it starts a new history, which a
-- reader does not trust until it reaches back far enough.

local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] .. string.format('%06d', tonumber(t[2]))
end
local epoch = tonumber(ARGV[2])
local share = tonumber(ARGV[3])
local cur = redis.call('GET', KEYS[1])
local f = {}
if cur then
  for s in string.gmatch(cur, '%S+') do
    f[#f + 1] = s
  end
end
local stored = tonumber(f[1])
local current = tonumber(ARGV[4])
if stored and tonumber(f[3]) then
  if stored >= epoch then
    return 0
  end
  current = tonumber(f[3])
else
  stored = nil
end
if ARGV[5] == 'shrink' and share > current then
  return 2
end
local out = {ARGV[2], now, ARGV[3]}
if stored == epoch - 1 then
  local oldest = tonumber(now) - tonumber(ARGV[6])
  local most = tonumber(ARGV[8])
  for i = 2, #f - 1, 2 do
    if (#out - 1) / 2 >= most then
      break
    end
    out[#out + 1] = f[i]
    out[#out + 1] = f[i + 1]
    if tonumber(f[i]) <= oldest then
      break
    end
  end
end
redis.call('SET', KEYS[1], table.concat(out, ' '), 'PX', ARGV[7])
return 1
