-- core.lua: the state, arithmetic and storage functions that take.lua and
-- reconcile.lua share. It is not a script of its own: package lua inserts it
-- at each script's "-- @core" line, so both scripts run the same text. The
-- functions mirror bucket/tokenbucket.go and bucket/quota.go line by line,
-- under the same names.

-- maxWait caps every wait, in µs: 2^53 is exact as a double.
local maxWait = 2 ^ 53

-- maxUnits caps a quota's used: every whole number up to 2^53 is exact.
local maxUnits = 2 ^ 53

-- quotaMargin is how long, in µs, a quota's state outlives its window.
local quotaMargin = 3600000000

-- clock returns now in µs: pinned, when the caller passes it (tests, as a
-- decimal string), else Redis TIME, one clock for every proxy node.
local function clock(pinned)
  if pinned ~= '' then
    return tonumber(pinned)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

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
