-- reconcile.lua: signed deltas on a request's buckets (token buckets and
-- quotas), applied once per request id.
--
-- KEYS[1]   when ARGV[2] > 0: the request's marker key, in the same slot as
--           the buckets ("llmguard:{<their hash tag>}::rc:<request id>");
--           its existence means this request id was applied.
-- KEYS[m+i] bucket of delta i (m = 1 with a marker, else 0); a key may
--           repeat, its deltas apply in order; in Redis Cluster all KEYS
--           share a slot.
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME.
-- ARGV[2]   how long the marker lives, ms; '0': no marker (an empty request
--           id, or an internal refund), the deltas apply on every call.
-- ARGV[6i-3] .. ARGV[6i+2]
--           capacity (units), rate (units per per), per (µs), windowStart
--           (µs), windowEnd (µs) and units of delta i, the limit as in
--           take.lua (a quota when windowEnd > 0). A token bucket: positive
--           units charge (the level may go below zero, debt), negative
--           refund (never above capacity). A quota: units are added to the
--           used of the delta's window (never below 0); when the stored
--           window is later than windowStart (the period moved on since the
--           take) the delta applies to nothing. The caller has validated the
--           limits (bucket.Limit.Validate).
--
-- Reply, an integer: 1 when the deltas were applied, 0 when the marker
-- already existed (a retry: nothing changed).
--
-- State and expiry as in take.lua. The core functions mirror
-- bucket/tokenbucket.go and bucket/quota.go line by line, under the same
-- names; take.lua holds identical copies (a Go test compares them).

-- maxWait caps every wait, in µs: 2^53 is exact as a double.
local maxWait = 2 ^ 53

-- maxUnits caps a quota's used: every whole number up to 2^53 is exact.
local maxUnits = 2 ^ 53

-- quotaMargin is how long, in µs, a quota's state outlives its window.
local quotaMargin = 3600000000

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

-- apply is a reconciliation delta: refill, remove units (negative refunds),
-- never above capacity.
local function apply(level, updated, capacity, rate, per, now, units)
  level, updated = refill(level, updated, capacity, rate, per, now)
  level = level - units
  if level > capacity then
    level = capacity
  end
  return level, updated
end

-- load returns a bucket's stored state, or a full one at now when missing
-- or holding a quota's state (found is then true: put overwrites it).
local function load(key, capacity, now)
  local v = redis.call('GET', key)
  if not v then
    return capacity, now, false
  end
  local sp = string.find(v, ' ', 1, true)
  local level, updated = tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1))
  if not level or not updated then
    return capacity, now, true
  end
  return level, updated, true
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

-- roll brings a quota into the item's window [windowStart, windowEnd): a
-- stored window before windowStart is a past period, so used starts again
-- from 0. A stored window at or after windowEnd (a lagging caller) is kept
-- with its used: a window never moves back. A stored window that starts
-- inside the item's (a period made longer on a reload) becomes the item's
-- window and keeps its used.
local function roll(used, window, windowStart, windowEnd)
  if window < windowStart then
    used = 0
    window = windowStart
  elseif window > windowStart and window < windowEnd then
    window = windowStart
  end
  return used, window
end

-- charge adds units to used (negative refunds): never below 0, saturating
-- at 2^53.
local function charge(used, units)
  used = used + units
  if used < 0 then
    used = 0
  elseif used > maxUnits then
    used = maxUnits
  end
  return used
end

-- untilEnd returns the µs from now until windowEnd; 0 once it has passed.
local function untilEnd(windowEnd, now)
  if now >= windowEnd then
    return 0
  end
  return windowEnd - now
end

-- quotaExpiry returns the µs from now until a quota's state of the window
-- ending at windowEnd may be forgotten: quotaMargin past the window's end.
local function quotaExpiry(windowEnd, now)
  return untilEnd(windowEnd, now) + quotaMargin
end

-- loadQuota returns a quota's stored state, or nothing used in the item's
-- window when missing or holding a token bucket's state (found is then true:
-- putQuota overwrites it).
local function loadQuota(key, windowStart)
  local v = redis.call('GET', key)
  if not v then
    return 0, windowStart, false
  end
  local used, window = string.match(v, '^q (%d+) (%d+)$')
  if not used then
    return 0, windowStart, true
  end
  return tonumber(used), tonumber(window), true
end

-- putQuota stores a quota's new state, or drops it when nothing is used (the
-- same as a missing quota). A state of the item's own window expires
-- quotaMargin past the window's end; a later window's keeps its TTL.
local function putQuota(key, found, used, window, windowStart, windowEnd, now)
  if used <= 0 then
    if found then
      redis.call('DEL', key)
    end
    return
  end
  local v = string.format('q %d %d', used, window)
  if window == windowStart then
    redis.call('SET', key, v, 'PX', string.format('%d', math.floor(quotaExpiry(windowEnd, now) / 1000)))
  else
    redis.call('SET', key, v, 'KEEPTTL')
  end
end

-- applyQuota is a reconciliation delta: units added to the used of the
-- delta's window. A stored window at or after windowEnd means the period
-- has moved on since the take: the delta applies to nothing (applied is
-- false) and the state stays as it was.
local function applyQuota(used, window, windowStart, windowEnd, units)
  if window >= windowEnd then
    return used, window, false
  end
  used, window = roll(used, window, windowStart, windowEnd)
  return charge(used, units), window, true
end

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local m = 0
local dedupFor = tonumber(ARGV[2])
if dedupFor > 0 then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then
    return 0
  end
  m = 1
end

for i = 1, #KEYS - m do
  local a = 6 * i - 3
  local capacity, rate, per = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local windowStart, windowEnd, units = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local key = KEYS[m + i]
  if windowEnd > 0 then
    local used, window, found = loadQuota(key, windowStart)
    local applied
    used, window, applied = applyQuota(used, window, windowStart, windowEnd, units)
    if applied then
      putQuota(key, found, used, window, windowStart, windowEnd, now)
    end
  else
    local level, updated, found = load(key, capacity, now)
    level, updated = apply(level, updated, capacity, rate, per, now, units)
    put(key, found, level, updated, capacity, wait(level, capacity, rate, per), now)
  end
end
return 1
