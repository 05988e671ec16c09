-- take.lua: the two-phase take over all of one request's token buckets.
--
-- KEYS[i]   bucket i, narrowest first; in Redis Cluster all KEYS share a slot.
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME: one clock for every proxy node.
-- ARGV[2]   '1' commits (a take); '0' only checks (phase 1, writes nothing).
-- ARGV[4i-1], ARGV[4i], ARGV[4i+1], ARGV[4i+2]
--           capacity (units), rate (units per per), per (µs) and cost
--           (units, >= 0) of bucket i. The caller has validated them
--           (bucket.Limit.Validate); keys are distinct.
--
-- Reply, all integers:
--   [1] allowed     1 when every bucket could pay (and, committing, paid), else 0
--   [2] deniedBy    0-based index of the first too-large bucket if any, else of
--                   the first bucket that could not pay; -1 when allowed
--   [3] tooLarge    1 when the denying bucket's cost exceeds its capacity
--   [4] retryAfter  µs: the longest wait among the short buckets; 0 when
--                   allowed or too large
--   [3+2i]          remaining of bucket i: its level rounded down (negative in
--                   debt), after the take, or after the refill on a denial
--   [4+2i]          reset of bucket i: µs until it is full again
--
-- State: one string per bucket, '<level> <updated>': level in units with 17
-- significant digits (it round-trips a double exactly), updated in µs. A
-- missing key is a full bucket; a bucket left at capacity is deleted; every
-- key written expires 1s past the instant it would be full again.
--
-- The core functions mirror bucket/tokenbucket.go line by line, under the
-- same names; reconcile.lua holds identical copies (a Go test compares them).

-- maxWait caps every wait, in µs: 2^53 is exact as a double.
local maxWait = 2 ^ 53

-- refill brings level forward to now. A clock that steps back (now <
-- updated) adds nothing and leaves updated alone. The clamp runs even then,
-- so a lowered capacity applies at once.
local function refill(level, updated, capacity, rate, per, now)
  if now > updated then
    level = level + (now - updated) * rate / per
    updated = now
  end
  if level > capacity then
    level = capacity
  end
  return level, updated
end

-- check is phase one for one refilled bucket: can it pay cost now, and can
-- it ever (cost above capacity never passes). A cost of zero always passes.
local function check(level, capacity, cost)
  if cost > capacity then
    return false, true
  end
  return cost == 0 or level >= cost, false
end

-- wait returns the least whole number of µs after which refill would lift
-- level to target (<= capacity), capped at maxWait.
local function wait(level, target, rate, per)
  if level >= target then
    return 0
  end
  local w = math.floor((target - level) * per / rate)
  if w >= maxWait then
    return maxWait
  end
  local i = 0
  while i < 2 and level + w * rate / per < target do
    w = w + 1
    i = i + 1
  end
  return w
end

-- floorUnits rounds level down to whole units, saturating at the int64 range
-- (Redis turns a reply number into an integer by a C cast).
local function floorUnits(level)
  local f = math.floor(level)
  if f >= 2 ^ 63 then
    return 2 ^ 63 - 1024 -- the largest double below 2^63
  elseif f <= -2 ^ 63 then
    return -2 ^ 63
  end
  return f
end

-- load returns a bucket's stored state, or a full one at now when missing.
local function load(key, capacity, now)
  local v = redis.call('GET', key)
  if not v then
    return capacity, now, false
  end
  local sp = string.find(v, ' ', 1, true)
  return tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1)), true
end

-- put stores a bucket's new state, or drops it when full (a full bucket and
-- a missing one are the same). reset is the µs until it is full; the key
-- expires 1s after that instant.
local function put(key, found, level, updated, capacity, reset, now)
  if level >= capacity then
    if found then
      redis.call('DEL', key)
    end
    return
  end
  local fullAt = updated + reset
  redis.call('SET', key, string.format('%.17g %d', level, updated),
    'PX', string.format('%d', math.floor((fullAt - now) / 1000) + 1000))
end

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local commit = ARGV[2] == '1'

local n = #KEYS
local reply = {1, -1, 0, 0}
local seen = {}

-- Phase 1: refill and check every bucket; write nothing.
local firstLarge, firstShort = -1, -1
local retry = 0
for i = 1, n do
  local a = 4 * i - 1
  local capacity, rate, per, cost = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local level, updated, found = load(KEYS[i], capacity, now)
  level, updated = refill(level, updated, capacity, rate, per, now)
  seen[i] = {level, updated, found}
  local ok, tooLarge = check(level, capacity, cost)
  if tooLarge then
    if firstLarge < 0 then
      firstLarge = i - 1
    end
  elseif not ok then
    if firstShort < 0 then
      firstShort = i - 1
    end
    retry = math.max(retry, wait(level, cost, rate, per))
  end
end

if firstLarge >= 0 or firstShort >= 0 then
  reply[1] = 0
  if firstLarge >= 0 then
    reply[2], reply[3] = firstLarge, 1
  else
    reply[2], reply[4] = firstShort, retry
  end
end

if reply[1] == 0 or not commit then
  for i = 1, n do
    local a = 4 * i - 1
    local capacity, rate, per = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local level = seen[i][1]
    reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), wait(level, capacity, rate, per)
  end
  return reply
end

-- Phase 2: every bucket can pay; commit every cost.
for i = 1, n do
  local a = 4 * i - 1
  local capacity, rate, per, cost = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local level = seen[i][1] - cost
  local reset = wait(level, capacity, rate, per)
  put(KEYS[i], seen[i][3], level, seen[i][2], capacity, reset, now)
  reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), reset
end
return reply
