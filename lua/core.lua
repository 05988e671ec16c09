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

-- digits maps the text of each of 0 to 9 to its number: an ARGV holding a
-- small count or index is read by one table lookup instead of a conversion
-- (a strtod); callers convert any other text ("x + 0").
local digits = {['0'] = 0, ['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7, ['8'] = 8, ['9'] = 9}

-- floor is math.floor, kept in a local: a call then reads one upvalue
-- instead of two table lookups (the global math, then its floor field).
-- Each script's entry sets it, at call time: a Redis Functions library's
-- load may not read the global math.
-- The hottest loops (takebatch.lua's token-bucket takes) floor a number x
-- they know is finite or NaN as x - x % 1 instead: the same double (Lua's
-- x % 1 is x - floor(x), exact for a finite x by Sterbenz's lemma, and so
-- is x minus it; NaN stays NaN), without a call: OP_MOD calls C's floor
-- inline, where floor(x) goes through the interpreter's call of a C
-- function. For an infinite x it is NaN, not x: those loops send an x that
-- may be infinite to floor.
local floor

-- maxWait caps every wait, in µs: 2^53 is exact as a double.
local maxWait = 2 ^ 53

-- maxUnits caps a quota's used: every whole number up to 2^53 is exact.
local maxUnits = 2 ^ 53

-- quotaMargin is how long, in µs, a quota's state outlives its window.
local quotaMargin = 3600000000

-- clock returns now in µs: pinned, when the caller passes it (tests, as a
-- decimal string), else Redis TIME, one clock for every proxy node.
-- TIME's seconds, as the last call read them: the text and its number
-- (converted once a second, not once a call, in a Redis Functions
-- library, whose upvalues last from call to call).
local clockText, clockSeconds = '', 0

local function clock(pinned)
  if pinned ~= '' then
    return pinned + 0
  end
  local t = redis.call('TIME')
  local s = t[1]
  if s ~= clockText then
    clockText, clockSeconds = s, s * 1000000
  end
  return clockSeconds + t[2]
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
  local w = floor((target - level) * per / rate)
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

-- The values encode made, by their text: the level and updated each was
-- made from, so that parse reads a value a script of this library wrote
-- (the last take's or reconciliation's of a busy bucket) by one lookup
-- instead of a match and two conversions. parse(encode(level, updated))
-- gives level and updated exactly ('%.17g' round-trips a double, updated
-- is a whole number of µs), so a hit returns what parsing would. In a
-- Redis Functions library the tables last from call to call (an EVAL
-- script makes them again on each call); at most encodedMax texts are
-- held, then the tables start again empty, so their memory is bounded
-- (some 150 bytes a text, estimated: under 100 KB).
local encodedLevel, encodedUpdated, encodedCount, encodedMax = {}, {}, 0, 512

-- parse reads a stored value v (false: the key is missing): 't', level and
-- updated for a token bucket's '<level> <updated>'; 'q', used and window
-- for a quota's 'q <used> <window>'; 'w', prev, cur and start for a window
-- counter's 'w <prev> <cur> <start>'; 'x' for any other value; nil when
-- missing. A token bucket's value, the most common, is tried first (one
-- match); no quota's or window counter's value matches its pattern with a
-- number first ('q' and 'w' are not numbers, and their values have three
-- and four fields), so the order changes no result.
local function parse(v)
  if not v then
    return nil
  end
  local known = encodedLevel[v]
  if known then
    return 't', known, encodedUpdated[v]
  end
  local level, updated = string.match(v, '^(%S+) (%d+)$')
  level = level and tonumber(level)
  if level then
    return 't', level, updated + 0
  end
  local used, window = string.match(v, '^q (%d+) (%d+)$')
  if used then
    return 'q', used + 0, window + 0
  end
  local prev, cur, start = string.match(v, '^w (%d+) (%d+) (%d+)$')
  if prev then
    return 'w', prev + 0, cur + 0, start + 0
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
  return floor((fullAt - now) / 1000) + 1000
end

-- encode is a bucket's stored value: the level with 17 significant digits
-- (it round-trips a double exactly) and updated in µs.
-- Each value made is remembered for parse (see encodedLevel), when
-- updated is a whole number (always: a µs reading), so that '%d' keeps it.
local function encode(level, updated)
  local v = string.format('%.17g %d', level, updated)
  if updated % 1 == 0 then
    if encodedCount >= encodedMax then
      encodedLevel, encodedUpdated, encodedCount = {}, {}, 0
    end
    encodedLevel[v], encodedUpdated[v], encodedCount = level, updated, encodedCount + 1
  end
  return v
end

-- The texts of the TTLs (ms) the scripts have set (pxText: take.lua's
-- takeLone, reconcile.lua's reconcileLone, takebatch.lua's writes), by number, kept from call to
-- call as the shapes are (at most pxMax, then emptied): Redis would make
-- the same text of the number ('%.17g' of a whole number below 1e17 is its
-- digits), at the cost of a sprintf on every SET; a bucket that takes of
-- one kind keep near one level gets the same TTL again and again. Each is
-- kept under its number plus 0.5: a key that is not a whole number goes to
-- a table's hash part in every Lua (gopher-lua, miniredis's, would grow the
-- array part to a whole number's index, millions of entries for a TTL of
-- hours).
local pxTexts, pxCount, pxMax = {}, 0, 1024

-- pxText returns the text of a TTL of ms milliseconds, a whole number or
-- its text, as SET's PX takes it: the digits Redis would make of the
-- number, from pxTexts when a call made them before.
local function pxText(ms)
  local px = pxTexts[ms + 0.5]
  if not px then
    px = string.format('%d', ms)
    if pxCount >= pxMax then
      pxTexts, pxCount = {}, 0
    end
    pxTexts[ms + 0.5], pxCount = px, pxCount + 1
  end
  return px
end

-- The limits read from their text (limitOf), by text, kept from call to
-- call as the encoded values are; at most limitsMax, then emptied.
local limitsByText, limitsCount, limitsMax = {}, 0, 256

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
    return floor(quotaExpiry(windowEnd, now) / 1000)
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

-- kindOf is the kind of a limit from its ARGV: 'q' a quota, 'w' a window
-- counter (windowEnd -1 or -2, see below), 'c' an in-flight limit, 't' a
-- token bucket.
local function kindOf(rate, windowEnd)
  if windowEnd > 0 then
    return 'q'
  elseif windowEnd < 0 then
    return 'w'
  elseif rate == 0 then
    return 'c'
  end
  return 't'
end

-- limitOf returns a limit sent as one text, its five numbers as the
-- scripts' ARGV give them, each a decimal integer, separated by spaces
-- ("capacity rate per windowStart windowEnd"): {capacity, rate, per,
-- windowStart, windowEnd, kindOf(rate, windowEnd)}, a table the caller
-- must not change (it is kept for the next call with the same text: a
-- hit is one lookup, a miss one match and five conversions). A text of
-- another form is an error.
local function limitOf(text)
  local l = limitsByText[text]
  if l then
    return l
  end
  local c, r, p, s, e = string.match(text, '^(%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+) (%-?%d+)$')
  if not c then
    error('llmguard: bad limit ' .. text)
  end
  local rate, windowEnd = r + 0, e + 0
  l = {c + 0, rate, p + 0, s + 0, windowEnd, kindOf(rate, windowEnd)}
  if limitsCount >= limitsMax then
    limitsByText, limitsCount = {}, 0
  end
  limitsByText[text], limitsCount = l, limitsCount + 1
  return l
end

-- unitsOf returns the units a batch sends packed in one ARGV (packed: 8
-- bytes a number, each an IEEE 754 double, little-endian; package bucket
-- writes float64(units), which rounds an int64 as strtod rounds its
-- decimal text, so each number is the double "text + 0" gave) as an
-- array, 1 to #packed / 8. One ARGV instead of one per number: Redis
-- parses each ARGV, makes a Lua string of it and frees both, and "+ 0"
-- runs a strtod, some 1.5k instructions a number against some 0.4k here
-- (callgrind, Redis 7.0.15: 64 numbers a call, 2.0k against 0.9k all
-- told). Redis's struct library unpacks up to unitsChunk numbers a C
-- call; a Lua without it (miniredis's gopher-lua) decodes the bytes
-- (unitFromBytes), bit for bit the same doubles. A length that is not a
-- multiple of 8 is an error.
-- structUnpack and structPack are struct.unpack and struct.pack, or false
-- without struct (miniredis), nil until readStruct read them: at a call
-- (a library's load may not read globals), once; rawget, because reading
-- a missing global is an error.
local unitsChunk, unitsFormats, structUnpack, structPack = 256, {}, nil, nil
local function readStruct()
  local lib = rawget(_G, 'struct')
  structUnpack, structPack = lib and lib.unpack or false, lib and lib.pack or false
end
local function unitFromBytes(b1, b2, b3, b4, b5, b6, b7, b8)
  local e = (b8 % 128) * 16 + (b7 - b7 % 16) / 16
  local m = ((((((b7 % 16) * 256 + b6) * 256 + b5) * 256 + b4) * 256 + b3) * 256 + b2) * 256 + b1 -- < 2^52: exact
  local x
  if e == 0 then
    x = m * 2 ^ -1074 -- zero or subnormal
  elseif e == 2047 then
    x = m == 0 and 1 / 0 or 0 / 0
  else
    x = (m + 2 ^ 52) * 2 ^ (e - 1075) -- a power of two: exact
  end
  if b8 >= 128 then
    x = -x
  end
  return x
end
local function unitsOf(packed)
  local n = #packed / 8
  if n % 1 ~= 0 then
    error('llmguard: packed units of ' .. #packed .. ' bytes')
  end
  if n == 0 then
    return {}
  end
  if structUnpack == nil then
    readStruct()
  end
  if not structUnpack then
    local u = {}
    for i = 1, n do
      u[i] = unitFromBytes(string.byte(packed, 8 * i - 7, 8 * i))
    end
    return u
  end
  if n <= unitsChunk then
    local f = unitsFormats[n]
    if not f then
      f = '<' .. string.rep('d', n)
      unitsFormats[n] = f
    end
    local u = {structUnpack(f, packed)} -- the n numbers, then the next position
    u[n + 1] = nil
    return u
  end
  local u, at = {}, 1
  for from = 1, n, unitsChunk do
    local k = math.min(unitsChunk, n - from + 1)
    local part = {structUnpack('<' .. string.rep('d', k), packed, at)}
    for i = 1, k do
      u[from + i - 1] = part[i]
    end
    at = part[k + 1]
  end
  return u
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
-- expired holder; the key lives 1s past the new holder's expiry, or longer
-- if it already did: a reload that shortened the lease must not cut short
-- the holders taken under the longer one (their key expired with the
-- newest holder's lease, and the limit admitted past its capacity). PTTL
-- is -1 on the key ZADD just made.
local function hold(key, holder, expiry, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  redis.call('ZADD', key, string.format('%d', expiry), holder)
  local ttl = floor((expiry - now) / 1000) + 1000
  if ttl > redis.call('PTTL', key) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- The window counters (sliding_window, fixed_window): mirror
-- bucket/window.go line by line, under the same names. In both scripts'
-- ARGV a window counter's limit is capacity, rate 0, per (µs), windowStart
-- = the window a delta's take counted in (µs; -1: the current window;
-- unused by a take) and windowEnd = -1 (sliding) or -2 (fixed).

-- isSliding reads a window counter's windowEnd code.
local function isSliding(windowEnd)
  return windowEnd == -1
end

-- slide brings a counter into now's window: the next window moves cur to
-- prev (a fixed window drops it), a later one empties both. A now before
-- start (a clock that stepped back) keeps the window.
local function slide(prev, cur, start, per, now, sliding)
  local current = now - math.fmod(now, per)
  if current <= start then
    return prev, cur, start
  end
  if current == start + per and sliding then
    return cur, 0, current
  end
  return 0, 0, current
end

-- weigh is the count a take at now sees: the sliding window's
-- prev * (per - elapsed) / per + cur; the fixed window's cur.
local function weigh(prev, cur, start, per, now, sliding)
  if not sliding then
    return cur
  end
  local elapsed = now - start
  if elapsed < 0 then
    elapsed = 0
  end
  return prev * (per - elapsed) / per + cur
end

-- fitsAt reports whether cost fits a sliding window at elapsed µs into the
-- window whose counts are prev and cur.
local function fitsAt(prev, cur, per, elapsed, capacity, cost)
  return prev * (per - elapsed) / per + cur <= capacity - cost
end

-- firstFit returns the least elapsed in [0, per) at which cost fits the
-- window whose counts are prev and cur, or per when it fits nowhere in it.
local function firstFit(prev, cur, per, capacity, cost)
  local room = capacity - cost - cur
  if room < 0 then
    return per
  end
  if prev <= 0 or fitsAt(prev, cur, per, 0, capacity, cost) then
    return 0
  end
  local f = floor(per - room * per / prev)
  if f >= per then
    return per
  end
  local e = f
  if e < 0 then
    e = 0
  end
  local i = 0
  while i < 2 and e < per and not fitsAt(prev, cur, per, e, capacity, cost) do
    e = e + 1
    i = i + 1
  end
  i = 0
  while i < 2 and e > 0 and fitsAt(prev, cur, per, e - 1, capacity, cost) do
    e = e - 1
    i = i + 1
  end
  return e
end

-- windowWait returns the least whole number of µs after now at which cost
-- fits a counter slid to now's window.
local function windowWait(prev, cur, start, per, now, capacity, cost, sliding)
  if not sliding then
    return start + per - now
  end
  local e = firstFit(prev, cur, per, capacity, cost)
  if e < per and start + e > now then
    return start + e - now
  end
  e = firstFit(cur, 0, per, capacity, cost)
  if e < per then
    return start + per + e - now
  end
  return start + 2 * per - now
end

-- windowReset returns the µs from now until the counter is empty again (a
-- fixed window: until its window ends, whatever it holds).
local function windowReset(prev, cur, start, per, now, sliding)
  if not sliding then
    return start + per - now
  elseif cur > 0 then
    return start + 2 * per - now
  elseif prev > 0 then
    return start + per - now
  end
  return 0
end

-- windowExpiry returns the µs from now until a counter's state may be
-- forgotten.
local function windowExpiry(start, per, now, sliding)
  if sliding then
    return start + 2 * per - now
  end
  return start + per - now
end

-- loadWindow returns a counter's state from its parsed value (kind, a, b,
-- c), or nothing taken in a window that slide replaces with now's (start
-- -1) when missing or holding another kind's value (found is then true:
-- putWindow overwrites it).
local function loadWindow(kind, a, b, c)
  if kind == 'w' then
    return a, b, c, true
  end
  return 0, 0, -1, kind ~= nil
end

-- putWindow returns how to store a counter's new state, as put: the ms its
-- key lives (1s past windowExpiry); false, to delete the key, when it
-- counts nothing (the same as a missing counter); nil when it was missing
-- and counts nothing.
local function putWindow(found, prev, cur, start, per, now, sliding)
  if prev <= 0 and cur <= 0 then
    if found then
      return false
    end
    return nil
  end
  return floor(windowExpiry(start, per, now, sliding) / 1000) + 1000
end

-- encodeWindow is a counter's stored value: prev, cur and start, whole
-- numbers.
local function encodeWindow(prev, cur, start)
  return string.format('w %d %d %d', prev, cur, start)
end
