-- core.lua: the state, arithmetic and encoding functions that take.lua and
-- reconcile.lua share. It is not a script of its own: package lua inserts it
-- at each script's "-- @core" line, so both scripts run the same text. The
-- arithmetic mirrors bucket/tokenbucket.go and bucket/quota.go line by line,
-- under the same names. parse, load and put (loadQuota and putQuota), and
-- encode (encodeQuota) read and write stored values; each script does the
-- reads and writes itself (one MGET, then a SET or DEL per changed key).
--
-- A decimal string becomes a number by "s + 0", which converts it once;
-- tonumber converts it twice (lua_isnumber, then lua_tonumber), and each
-- conversion is a strtod: about a tenth of a take's work before.

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
    return pinned + 0
  end
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
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

-- parse reads a stored value v (false: the key is missing): 't', level and
-- updated for a token bucket's '<level> <updated>'; 'q', used and window
-- for a quota's 'q <used> <window>'; 'x' for any other value; nil when
-- missing.
local function parse(v)
  if not v then
    return nil
  end
  local used, window = string.match(v, '^q (%d+) (%d+)$')
  if used then
    return 'q', used + 0, window + 0
  end
  local level, updated = string.match(v, '^(%S+) (%d+)$')
  level = level and tonumber(level)
  if level then
    return 't', level, updated + 0
  end
  return 'x'
end

-- load returns a bucket's state from its parsed value (kind, a, b), or a
-- full one at now when missing or holding another kind's value (found is
-- then true: put overwrites it).
local function load(kind, a, b, capacity, now)
  if kind == 't' then
    return a, b, true
  end
  return capacity, now, kind ~= nil
end

-- put returns how to store a bucket's new state: the ms its key lives
-- (reset is the µs until it is full; the key expires 1s after that
-- instant); or false, to delete the key, when it is full (a full bucket and
-- a missing one are the same); or nil, to write nothing, when it is full
-- and was missing.
local function put(found, level, updated, capacity, reset, now)
  if level >= capacity then
    if found then
      return false
    end
    return nil
  end
  local fullAt = updated + reset
  return math.floor((fullAt - now) / 1000) + 1000
end

-- encode is a bucket's stored value: the level with 17 significant digits
-- (it round-trips a double exactly) and updated in µs.
local function encode(level, updated)
  return string.format('%.17g %d', level, updated)
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

-- loadQuota returns a quota's state from its parsed value (kind, a, b), or
-- nothing used in the item's window when missing or holding another kind's
-- value (found is then true: putQuota overwrites it).
local function loadQuota(kind, a, b, windowStart)
  if kind == 'q' then
    return a, b, true
  end
  return 0, windowStart, kind ~= nil
end

-- putQuota returns how to store a quota's new state, as put: the ms its key
-- lives, quotaMargin past the window's end, for a state of the item's own
-- window; true, to keep the key's TTL, for a later window's; false, to
-- delete the key, when nothing is used (the same as a missing quota); nil
-- when it was missing and nothing is used.
local function putQuota(found, used, window, windowStart, windowEnd, now)
  if used <= 0 then
    if found then
      return false
    end
    return nil
  end
  if window == windowStart then
    return math.floor(quotaExpiry(windowEnd, now) / 1000)
  end
  return true
end

-- encodeQuota is a quota's stored value: used and window, whole numbers.
local function encodeQuota(used, window)
  return string.format('q %d %d', used, window)
end

-- In-flight limits (bucket/concurrent.go): a sorted set of holders (request
-- ids) scored by expiry in µs. A limit's ARGV carries rate 0 and windowEnd
-- 0 (per is the slot lease, µs); kindOf tells the three kinds apart.

-- slotRetry is the wait of a denial by an in-flight limit, µs.
local slotRetry = 1000000

-- kindOf is the kind of a limit from its ARGV: 'q' a quota, 'c' an
-- in-flight limit, 't' a token bucket.
local function kindOf(rate, windowEnd)
  if windowEnd > 0 then
    return 'q'
  elseif rate == 0 then
    return 'c'
  end
  return 't'
end

-- holderOf is the request id a marker key names
-- ("llmguard:{<tag>}::tk:<id>" or "::rc:<id>"); nil without one.
local function holderOf(marker)
  if not marker then
    return nil
  end
  return string.match(marker, '}::%a%a:(.*)$')
end

-- liveSlots counts the holders of key whose expiry is after now; a key
-- holding another kind's string (stored, as MGET read it) holds none.
local function liveSlots(key, stored, now)
  if stored then
    return 0
  end
  return redis.call('ZCOUNT', key, string.format('(%d', now), '+inf')
end

-- checkSlots is phase one for one in-flight limit: can cost slots be held
-- now, and can they ever (a cost above capacity never passes). A cost of
-- zero always passes.
local function checkSlots(live, capacity, cost)
  if cost > capacity then
    return false, true
  end
  return cost == 0 or live <= capacity - cost, false
end

-- slotReset is the reset of an in-flight limit: 0 while a slot is free,
-- else slotRetry.
local function slotReset(live, capacity)
  if live < capacity then
    return 0
  end
  return slotRetry
end

-- hold adds holder to key's set with its expiry, first dropping every
-- expired holder; the key lives 1s past the new holder's expiry.
local function hold(key, holder, expiry, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  redis.call('ZADD', key, string.format('%d', expiry), holder)
  redis.call('PEXPIRE', key, math.floor((expiry - now) / 1000) + 1000)
end
