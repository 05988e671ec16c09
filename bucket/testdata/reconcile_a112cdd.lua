-- reconcile.lua: the reconciliations of many requests in one script: each
-- a request's signed deltas on its buckets (token buckets and quotas),
-- applied once per request id; or, in void mode, the refund of a request's
-- take, applied only when that take was, once; or a refund applied on every
-- call. The entries' markers are checked and set in order; then the
-- deltas of the entries that apply are settled once per bucket (and
-- limit), at the script's instant: their refunds, then their charges, the
-- strictest order of the entries (see settle); a bucket that several
-- entries touch is read once and written once.
--
-- KEYS      entry after entry: the entry's marker key unless its mode is
--           'n', then the bucket key of each of its deltas; in Redis
--           Cluster all KEYS share a slot. A reconciliation's marker is
--           "llmguard:{<hash tag>}::rc:<request id>", whose existence
--           means this request id was applied, or (mode 'h') the set
--           "llmguard:{<hash tag>}::rcs:<epoch>" of the applied ids of one
--           epoch of ids (bucket.NewRequestID), the id a member; a void's
--           is the take marker of take.lua,
--           "llmguard:{<hash tag>}::tk:<request id>", followed (mode 'w') by
--           the taken set of its epoch, "…::tkt:<epoch>" (takebatch.lua). A
--           bucket key may repeat, within an entry and across entries: its
--           deltas are summed (see settle).
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME.
-- ARGV[2]   how long a reconciliation's marker lives, ms.
-- ARGV[3]   how long a void's marker (the tombstone 'v') lives, ms.
-- ARGV[4]   L, the number of distinct limits the deltas name; then one
--           ARGV per limit, its five numbers as one text (core.lua's
--           limitOf, converted once per text and kept from call to call):
--           "capacity rate per windowStart windowEnd", capacity (units),
--           rate (units per per), per (µs), windowStart (µs), windowEnd
--           (µs), as in take.lua (a quota when
--           windowEnd > 0, with rate and per 0). The caller has validated
--           them (bucket.Limit.Validate). A window counter (windowEnd -1
--           sliding, -2 fixed; see core.lua) has rate 0 and windowStart
--           the window its take counted in (-1: the current window).
-- then, entry after entry:
--   mode    'r': a reconciliation, once per request id (SET NX of its
--           marker); 'h': the same, its marker a member of its epoch's set
--           (the id follows the mode as an ARGV of its own); 'v': the void
--           of a take (the deltas are its costs, negated); 'w': the same,
--           for an id whose take a batch may have recorded in its taken
--           set instead of its marker (two KEYS; the id follows the mode);
--           'n': no marker
--           (an empty request id, or an internal refund), the deltas apply
--           on every call.
--   id      modes 'h' and 'w' only: the request id.
--   count   the number of the entry's deltas, then 2 ARGV per delta: the
--           index of its limit (1 to L) and its units. A token bucket:
--           positive units charge (the level may go below zero, debt),
--           negative refund (never above capacity). A quota: units are
--           added to the used of the delta's window (never below 0); when
--           the stored window is later than windowStart (the period moved
--           on since the take) the delta applies to nothing. An
--           in-flight limit (rate 0, windowEnd 0): negative units release
--           the slot of the entry's request id (ZREM; named by its marker
--           key, or its id in mode 'h'), other units change nothing; an entry without a marker
--           releases nothing. A window
--           counter: units are added to the count of the take's window
--           (never below 0): cur when it is the current window, prev when
--           it is a sliding window's previous one, nothing otherwise.
--
-- Reply: one integer per entry, in order: 1 when its deltas were applied, 0
-- when its marker already existed (a retry: nothing changed). In void mode:
-- 1 when the take marker said 't' (the take was applied: refunded now), 0
-- otherwise (no take yet: the marker is left 'v', a tombstone that makes a
-- late take apply nothing; or 'v' already: a second void). Either way the
-- marker is then 'v', expiring ARGV[3] ms later. Mode 'w' alike, the
-- marker counted as 't' when it is missing and the id is in the taken set.
--
-- Redis commands: TIME (unless ARGV[1] pins now); one MGET of every bucket
-- key, before anything is written (so that an error, such as a key of
-- another type, fails the script before it changes anything); per marker
-- set one SMISMEMBER of its entries' ids, and when any applies one SADD of
-- them and a PEXPIRE of the set to ARGV[2] ms (so every member outlives its
-- write by ARGV[2] at least: the set lives that long past its last write;
-- a set of one entry: its SADD, whose reply tells, and the PEXPIRE);
-- per entry a SET NX of its marker (mode 'r'), or a GET and at most one SET
-- (mode 'v'; mode 'w' adds a SISMEMBER of the taken set when the marker
-- is missing); then
-- one SET or DEL per bucket key whose state changed.
--
-- State and expiry as in take.lua. The functions mirror
-- bucket/tokenbucket.go and bucket/quota.go line by line, under the same
-- names; those take.lua needs too live in core.lua, inserted at the
-- "-- @core" line below.

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
  redis.call('PEXPIRE', key, floor((expiry - now) / 1000) + 1000)
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

-- voidMark is what a void does with the take marker ('t' taken, 'v'
-- voided, false when missing): refund the take's costs when it was
-- applied, and leave the marker voided in every case, so that a second void
-- refunds nothing and a late take applies nothing.
local function voidMark(mark)
  return 'v', mark == 't'
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

-- applyWindow is a reconciliation delta: slide into now's window, then add
-- units to the window the take counted in (taken; -1: the current one):
-- cur for the current window, prev for a sliding window's previous one;
-- any other window applies to nothing (applied is false).
local function applyWindow(prev, cur, start, per, now, taken, units, sliding)
  prev, cur, start = slide(prev, cur, start, per, now, sliding)
  if taken < 0 or taken == start then
    return prev, charge(cur, units), start, true
  end
  if sliding and taken == start - per then
    return charge(prev, units), cur, start, true
  end
  return prev, cur, start, false
end

-- A bucket key's view, the state the script sees and will write, is an
-- array: kind, a and b (as parse returns them), whether the key was stored
-- before the script, whether its state changed, the TTL to write (ms;
-- false: keep the key's), and a window counter's third number (c).
local KIND, A, B, FOUND, DIRTY, PX, C = 1, 2, 3, 4, 5, 6, 7

-- stage records in view c a bucket's new state (kind 't' or 'q', numbers a
-- and b) and what put or putQuota returned for it (how: a TTL in ms, true
-- to keep the key's TTL, false to delete it, nil to write nothing). The
-- last state of each key is written once, at the end. A TTL kept is the one
-- the key has at that point: one an earlier entry set, else its stored
-- one.
local function stage(c, how, kind, a, b, z)
  if how == nil then
    return
  end
  c[DIRTY] = true
  if not how then
    c[KIND], c[PX] = nil, false
    return
  end
  c[KIND], c[A], c[B], c[C] = kind, a, b, z
  if how ~= true then
    c[PX] = how
  end
end

-- settle applies to view c, once, the deltas of the batch's applying
-- entries on one bucket under one limit (the limits array: capacity, rate,
-- per, windowStart, windowEnd, kind), summed: refund, the sum of the
-- negative units, and spend, the sum of the positive ones. A bucket the
-- batch names under two limits (a reload between two requests, a quota's
-- period moving on) has one group per limit, settled in order of each
-- group's first delta.
--
-- The refunds go first, then the charges. Order changes a result only
-- through a clamp, and only refunds meet one: a token bucket's level is
-- clamped at capacity, a quota's or a window counter's count at 0. Applied
-- one by one, x(i) = clamp(x(i-1) + d(i)); for a clamp at capacity from
-- above the final level is min(x0 + sum, capacity + the least sum of a
-- tail of the deltas), and every tail sums to at least -spend, the sum of
-- all the charges, which the order refunds-then-charges reaches: its level
-- is the least of every order. For a clamp at 0 from below the final count
-- is max(x0 + sum, the greatest sum of a tail), at most spend, which
-- refunds-then-charges reaches: its count is the greatest of every order.
-- So the batch is never more generous than the requests applied one by one
-- in any order (nothing spends past a limit); charges first would be the
-- most generous order. (bucket's TestReconcileAggregateStrictest checks it
-- against every order of small batches.) A quota's used also saturates at
-- 2^53 (charge), a clamp on charges, far above any capacity. A group
-- of deltas of zero units (never sent by package bucket) applies 0 once: a
-- refill, a roll or a slide, as one such delta alone.
local function settle(c, limit, refund, spend, now)
  local capacity, rate, per, windowStart, windowEnd = limit[1], limit[2], limit[3], limit[4], limit[5]
  local limitKind = limit[6]
  if limitKind == 'w' then
    local sliding = isSliding(windowEnd)
    local prev, cur, start, found = loadWindow(c[KIND], c[A], c[B], c[C])
    local applied = false
    if refund ~= 0 or spend == 0 then
      prev, cur, start, applied = applyWindow(prev, cur, start, per, now, windowStart, refund, sliding)
    end
    if spend ~= 0 then
      prev, cur, start, applied = applyWindow(prev, cur, start, per, now, windowStart, spend, sliding)
    end
    if applied then
      stage(c, putWindow(found, prev, cur, start, per, now, sliding), 'w', prev, cur, start)
    end
  elseif limitKind == 'q' then
    local used, window, found = loadQuota(c[KIND], c[A], c[B], windowStart)
    local applied = false
    if refund ~= 0 or spend == 0 then
      used, window, applied = applyQuota(used, window, windowStart, windowEnd, refund)
    end
    if spend ~= 0 then
      used, window, applied = applyQuota(used, window, windowStart, windowEnd, spend)
    end
    if applied then
      stage(c, putQuota(found, used, window, windowStart, windowEnd, now), 'q', used, window)
    end
  else
    local level, updated, found = c[A], c[B], true -- load's, for a token bucket's state
    if c[KIND] ~= 't' then
      level, updated, found = load(c[KIND], c[A], c[B], capacity, now)
    end
    if refund ~= 0 or spend == 0 then
      level, updated = apply(level, updated, capacity, rate, per, now, refund)
    end
    if spend ~= 0 then
      level, updated = apply(level, updated, capacity, rate, per, now, spend)
    end
    stage(c, put(found, level, updated, capacity, wait(level, capacity, rate, per), now), 't', level, updated)
  end
end

-- indexText is the text of each of 1 to 9, as the entries send a limit's
-- index: a lookup instead of a conversion (tostring) per limit.
local indexText = {'1', '2', '3', '4', '5', '6', '7', '8', '9'}

-- markers is how many marker keys an entry of each mode names.
local markers = {r = 1, h = 1, v = 1, w = 2, n = 0}

-- @entry: the script's work; a Redis Functions library runs it as a function.
floor = math.floor
local now = clock(ARGV[1])
local dedupFor, voidFor = ARGV[2], ARGV[3]
local nl = digits[ARGV[4]] or ARGV[4] + 0
local first = 5 + nl -- the first entry's ARGV

-- Every limit as numbers (limitOf: capacity, rate, per, windowStart,
-- windowEnd, then its kind): limit i is ARGV[4 + i]. It is found by its
-- index as a number or as the text the entries send it in (a lookup, not
-- a conversion, per delta).
local limits = {}
for l = 1, nl do
  limits[l] = limitOf(ARGV[4 + l])
  limits[indexText[l] or tostring(l)] = limits[l]
end

-- Every bucket key once, in order of first use; every marker set once, in
-- order of first use, with the request ids of its entries (ids).
local order, view = {}, {}
local sets, ids = {}, {}
local k, a = 1, first
while a <= #ARGV do
  local mode, head = ARGV[a], 2
  if mode == 'h' then
    head = 3
    local set = KEYS[k]
    local list = ids[set]
    if not list then
      list = {}
      ids[set] = list
      sets[#sets + 1] = set
    end
    list[#list + 1] = ARGV[a + 1]
  end
  if mode == 'w' then
    head = 3
  end
  local count = digits[ARGV[a + head - 1]] or ARGV[a + head - 1] + 0
  k = k + markers[mode]
  for i = k, k + count - 1 do
    local key = KEYS[i]
    if not view[key] then
      view[key] = true
      order[#order + 1] = key
    end
  end
  k = k + count
  a = a + head + 2 * count
end

-- Every bucket's stored value, before anything is written: one MGET per
-- 1000 keys (unpack's bound is far above it).
for from = 1, #order, 1000 do
  local to = math.min(from + 999, #order)
  local stored = redis.call('MGET', unpack(order, from, to))
  for i = from, to do
    local kind, x, y, z = parse(stored[i - from + 1])
    view[order[i]] = {kind, x, y, kind ~= nil, false, false, z}
  end
end

-- The members each marker set already holds, of its entries' ids: one
-- SMISMEMBER per set of several entries (seen[set][id] is true for those);
-- fresh[set] collects the ids applied now. A set of one entry (a lone
-- reconciliation) is asked nothing here: its entry's SADD tells.
local seen, fresh = {}, {}
for _, set in ipairs(sets) do
  local list = ids[set]
  local s = {}
  if #list > 1 then
    local got = redis.call('SMISMEMBER', set, unpack(list))
    for i = 1, #list do
      if got[i] == 1 then
        s[list[i]] = true
      end
    end
  end
  seen[set], fresh[set] = s, {}
end

local reply, groups = {}, {}
k, a = 1, first
while a <= #ARGV do
  local mode, head = ARGV[a], 2
  if mode == 'h' or mode == 'w' then
    head = 3
  end
  local count = digits[ARGV[a + head - 1]] or ARGV[a + head - 1] + 0
  local applies = true
  if mode == 'h' then
    local id, set = ARGV[a + 1], KEYS[k]
    if #ids[set] == 1 then
      applies = redis.call('SADD', set, id) == 1
      if applies then
        redis.call('PEXPIRE', set, dedupFor)
      end
    else
      local s = seen[set]
      applies = not s[id]
      if applies then
        s[id] = true
        local f = fresh[set]
        f[#f + 1] = id
      end
    end
  elseif mode == 'w' then
    -- As 'v', the take counted as 't' when a batch recorded it in its
    -- taken set. (Written as ifs: gopher-lua, miniredis's Lua, gave true
    -- for "not voided and redis.call(...) == 1" with voided true.)
    local stored = redis.call('GET', KEYS[k])
    local mark = stored
    if mark ~= 'v' and mark ~= 't' then
      if redis.call('SISMEMBER', KEYS[k + 1], ARGV[a + 1]) == 1 then
        mark = 't'
      end
    end
    local nextMark, refund = voidMark(mark)
    if stored ~= nextMark then
      redis.call('SET', KEYS[k], nextMark, 'PX', voidFor)
    end
    applies = refund
  elseif mode == 'v' then
    local mark = redis.call('GET', KEYS[k])
    local nextMark, refund = voidMark(mark)
    if mark ~= nextMark then
      redis.call('SET', KEYS[k], nextMark, 'PX', voidFor)
    end
    applies = refund
  elseif mode == 'r' then
    applies = redis.call('SET', KEYS[k], '1', 'NX', 'PX', dedupFor) ~= false
  end
  k = k + markers[mode]
  reply[#reply + 1] = applies and 1 or 0
  for i = 0, count - 1 do
    if not applies then
      break
    end
    local at = ARGV[a + head + 2 * i]
    local limit = limits[at] or limits[at + 0]
    local units = ARGV[a + head + 1 + 2 * i] + 0
    local c = view[KEYS[k + i]]
    if limit[6] == 'c' then
      local holder = head == 3 and ARGV[a + 1] or mode ~= 'n' and holderOf(KEYS[k - 1])
      if units < 0 and holder and not c[FOUND] and not c[DIRTY] then
        redis.call('ZREM', KEYS[k + i], holder)
      end
    else
      local g = c[limit]
      if not g then
        g = {c, limit, 0, 0}
        c[limit] = g
        groups[#groups + 1] = g
      end
      if units < 0 then
        g[3] = g[3] + units
      else
        g[4] = g[4] + units
      end
    end
  end
  k = k + count
  a = a + head + 2 * count
end

-- The markers of the ids applied now, one SADD per set, which then lives
-- dedupFor ms more (every marker at least dedupFor after its write).
for _, set in ipairs(sets) do
  local f = fresh[set]
  if #f > 0 then
    redis.call('SADD', set, unpack(f))
    redis.call('PEXPIRE', set, dedupFor)
  end
end

-- Every group's sums, in order of the group's first delta: refunds, then
-- charges (see settle).
for _, g in ipairs(groups) do
  settle(g[1], g[2], g[3], g[4], now)
end

for _, key in ipairs(order) do
  local c = view[key]
  if c[DIRTY] then
    if c[KIND] == nil then
      if c[FOUND] then
        redis.call('DEL', key)
      end
    else
      local v
      if c[KIND] == 'q' then
        v = encodeQuota(c[A], c[B])
      elseif c[KIND] == 'w' then
        v = encodeWindow(c[A], c[B], c[C])
      else
        v = encode(c[A], c[B])
      end
      if c[PX] then
        redis.call('SET', key, v, 'PX', c[PX])
      else
        redis.call('SET', key, v, 'KEEPTTL')
      end
    end
  end
end
return reply
