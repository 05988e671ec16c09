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
-- KEYS      every key the call names, once each, in any order (package
--           bucket sends them in order of first use): bucket keys and
--           marker keys, named below by their index (1 to #KEYS); in Redis
--           Cluster all KEYS share a slot. A reconciliation's marker is
--           "llmguard:{<hash tag>}::rc:<request id>", whose existence
--           means this request id was applied, or (mode 'h') the set
--           "llmguard:{<hash tag>}::rcs:<epoch>" of the applied ids of one
--           epoch of ids (bucket.NewRequestID), the id a member; a void's
--           is the take marker of take.lua,
--           "llmguard:{<hash tag>}::tk:<request id>", with (mode 'w') the
--           taken set of its epoch, "…::tkt:<epoch>" (takebatch.lua), and
--           its voided set, "…::tkv:<epoch>". A
--           bucket key may repeat, within an entry and across entries: its
--           deltas are summed (see settle).
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME. A text opening with "R " is instead the shape of a
--           lone reconciliation (one request id of bucket.NewRequestID's
--           form, its deltas on distinct token buckets and quotas) sent in
--           the lone layout: "R <ARGV[2] below>;<limit>;<limit>...", then
--           ARGV[2] the request id, ARGV[2 + i] the units of delta i and,
--           in tests only, ARGV[n + 3] now; KEYS[1] the id's marker set,
--           KEYS[1 + i] the bucket of delta i (see reconcileLone below).
--           Its reply, commands and stored state are this layout's for the
--           same call.
-- ARGV[2]   how long a reconciliation's marker lives, ms.
-- ARGV[3]   how long a void's marker (the tombstone 'v') lives, ms.
-- ARGV[4]   L, the number of distinct limits the deltas name.
-- ARGV[5]   S, the number of distinct shapes the entries have.
-- ARGV[6]   H, the number of marker sets of mode 'h'.
-- then one ARGV per limit, its five numbers as one text (core.lua's
--           limitOf, converted once per text and kept from call to call):
--           "capacity rate per windowStart windowEnd", capacity (units),
--           rate (units per per), per (µs), windowStart (µs), windowEnd
--           (µs), as in take.lua (a quota when
--           windowEnd > 0, with rate and per 0). The caller has validated
--           them (bucket.Limit.Validate). A window counter (windowEnd -1
--           sliding, -2 fixed; see core.lua) has rate 0 and windowStart
--           the window its take counted in (-1: the current window).
-- then per marker set of mode 'h': the index of its key among KEYS, the
--           number n of its entries, then their n request ids, in entry
--           order (each entry of the set takes the next);
-- then per shape, what entries of one kind share:
--   mode    'r': a reconciliation, once per request id (SET NX of its
--           marker); 'h': the same, its marker a member of its epoch's set
--           (the shape names the set, whose list holds the id); 'v': the
--           void of a take (the deltas are its costs, negated); 'w': the
--           same, for an id whose take a batch may have recorded in its
--           taken set instead of its marker, and whose void a batch looks
--           for in the voided set (the shape names both sets, each entry
--           sends its marker and its id); 'n': no marker (an empty
--           request id, or an internal refund), the deltas apply on every
--           call.
--   set     mode 'h': the index of its marker set (1 to H); mode 'w':
--           the index of the taken set among KEYS, then that of the
--           voided set; other modes send none.
--   count   the number of deltas, then 2 ARGV per delta: the index of its
--           bucket key among KEYS and the index of its limit (1 to L).
-- then, run after run of consecutive entries of one shape: the index of
--           the shape (1 to S), the number of entries in the run, then
--           entry after entry:
--   marker  modes 'r', 'v' and 'w' only: the index of its marker key among
--           KEYS;
--   id      mode 'w' only: the request id (mode 'h': its set's next id);
--   units   one ARGV per delta of its shape, in the shape's order. A
--           token bucket:
--           positive units charge (the level may go below zero, debt),
--           negative refund (never above capacity). A quota: units are
--           added to the used of the delta's window (never below 0); when
--           the stored window is later than windowStart (the period moved
--           on since the take) the delta applies to nothing. An
--           in-flight limit (rate 0, windowEnd 0): negative units release
--           the slot of the entry's request id (ZREM; named by its marker
--           key, or by its id in modes 'h' and 'w'), other units change
--           nothing; an entry without a marker releases nothing. A window
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
-- marker counted as 't' when it is missing and the id is in the taken set;
-- the id is then a member of the voided set too, which lives ARGV[3] ms
-- past its last write (takebatch.lua reads the set, take.lua and the
-- batches of versions before the set read the marker).
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
-- is missing, and a SADD and a PEXPIRE of the voided set); then
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

-- markerOf tells, for each mode, whether its entries send a marker key's
-- index (each entry its own key).
local markerOf = {r = true, v = true, w = true}

-- A marker set's record (mode 'h'): its key, the ARGV of its first id,
-- its id count, the ARGV of the id of its next entry, the ids it already
-- holds (true by id), the ids applied now (in entry order).
local SETKEY, FROM, IDS, NEXT, SEEN, FRESH = 1, 2, 3, 4, 5, 6

-- The shapes of lone reconciliations read from their text (rcShapeOf), by
-- text, kept from call to call as core.lua's limits are; at most
-- rcShapesMax, then emptied.
local rcShapes, rcShapesCount, rcShapesMax = {}, 0, 256

-- rcShapeOf returns the shape a lone reconciliation sends as ARGV[1]: the
-- text "R <dedupFor>;<limit>;<limit>..." (dedupFor the marker set's TTL in
-- ms, then each delta's limit as limitOf reads it, a token bucket's or a
-- quota's) read as {dedupFor, n, limit1, ..., limitn} (n the deltas; each
-- limit limitOf's table), a table the caller must not change (it is kept
-- for the next call with the same text: a hit is one lookup). A text that
-- does not open with "R " is not a shape: nil (the batch layout's ARGV[1]
-- is now, '' or digits). A text of another form after "R ", or a limit of
-- another kind, is an error.
local function rcShapeOf(text)
  local s = rcShapes[text]
  if s then
    return s
  end
  if string.sub(text, 1, 2) ~= 'R ' then
    return nil
  end
  local ttl, at = string.match(text, '^R (%d+)()')
  if not ttl then
    error('llmguard: bad lone reconciliation shape ' .. text)
  end
  s = {ttl, 0}
  local n = 0
  while at <= #text do
    local l, next = string.match(text, '^;([^;]+)()', at)
    if not l then
      error('llmguard: bad lone reconciliation shape ' .. text)
    end
    l = limitOf(l)
    if l[6] ~= 't' and l[6] ~= 'q' then
      error('llmguard: bad lone reconciliation shape ' .. text)
    end
    n, at = n + 1, next
    s[2 + n] = l
  end
  if n == 0 then
    error('llmguard: bad lone reconciliation shape ' .. text)
  end
  s[2] = n
  if rcShapesCount >= rcShapesMax then
    rcShapes, rcShapesCount = {}, 0
  end
  rcShapes[text], rcShapesCount = s, rcShapesCount + 1
  return s
end

-- reconcileLone is the script for one reconciliation (mode 'h': a request
-- id of bucket.NewRequestID's form, its marker a member of its epoch's
-- set) whose deltas are on distinct keys, each a token bucket's or a
-- quota's, sent in the lone layout: KEYS[1] the marker set, KEYS[1 + i]
-- the bucket of delta i; ARGV[1] the shape (rcShapeOf: the set's TTL and
-- each delta's limit, as one text), ARGV[2] the request id, ARGV[2 + i]
-- the units of delta i and, in tests only, ARGV[n + 3] now (µs; absent:
-- Redis TIME). It does what the batch layout does for such a call, step
-- for step: TIME, one MGET of the buckets, the id's SADD (a 0: a retry,
-- nothing written, reply {0}) and the set's PEXPIRE, then each bucket
-- settled by its one delta (settle's steps for one delta, the same core
-- steps in the same order, so the same doubles) and written by one SET or
-- DEL; the same reply, {1}. Without the batch's tables (limits, sets,
-- shapes, views, groups), with n + 2 ARGV instead of 4n + 14 (Redis makes
-- a Lua string of each), and with a token bucket's steps inlined (a Lua
-- call costs Redis 7.0's interpreter some 1k instructions). bucket's
-- TestReconcileLoneMatchesBatch compares it with the batch layout.
local function reconcileLone(s, KEYS, ARGV)
  local n = s[2]
  if #KEYS ~= n + 1 or #ARGV < n + 2 then
    error('llmguard: lone reconciliation of ' .. #KEYS .. ' KEYS, ' .. #ARGV .. ' ARGV for ' .. n .. ' deltas')
  end
  local pinned, now = ARGV[n + 3], 0
  if pinned then -- clock(pinned)
    now = pinned + 0
  else
    local t = redis.call('TIME')
    local sec = t[1]
    if sec ~= clockText then
      clockText, clockSeconds = sec, sec * 1000000
    end
    now = clockSeconds + t[2]
  end
  local stored = redis.call('MGET', unpack(KEYS, 2, n + 1))
  if redis.call('SADD', KEYS[1], ARGV[2]) ~= 1 then
    return {0}
  end
  redis.call('PEXPIRE', KEYS[1], s[1])
  for i = 1, n do
    local l, key, v = s[2 + i], KEYS[1 + i], stored[i]
    local units = ARGV[2 + i] + 0
    local capacity = l[1]
    if l[6] == 'q' then -- settle, a quota: loadQuota, applyQuota, putQuota
      local windowStart, windowEnd = l[4], l[5]
      local kind, used, window = parse(v)
      used, window = loadQuota(kind, used, window, windowStart)
      if window < windowEnd then
        used, window = roll(used, window, windowStart, windowEnd)
        used = charge(used, units)
        if used <= 0 then
          if kind ~= nil then
            redis.call('DEL', key)
          end
        elseif window == windowStart then
          redis.call('SET', key, encodeQuota(used, window), 'PX', floor(quotaExpiry(windowEnd, now) / 1000))
        else
          redis.call('SET', key, encodeQuota(used, window), 'KEEPTTL')
        end
      end
    else -- settle, a token bucket: load, apply, wait, put, encode
      local rate, per = l[2], l[3]
      local level, updated, found
      if v then -- parse and load: a value this library wrote by one lookup
        level = encodedLevel[v]
        if level then
          updated, found = encodedUpdated[v], true
        else
          local kind, x, y = parse(v)
          level, updated, found = load(kind, x, y, capacity, now)
        end
      else
        level, updated, found = capacity, now, false
      end
      if now > updated then -- apply: refill
        level = level + (now - updated) * rate / per
        updated = now
      end
      if level > capacity then
        level = capacity
      end
      level = level - units
      if level > capacity then
        level = capacity
      end
      if level >= capacity then -- put: full
        if found then
          redis.call('DEL', key)
        end
      else
        local reset = floor((capacity - level) * per / rate) -- wait(level, capacity, rate, per)
        if reset >= maxWait then
          reset = maxWait
        else
          local j = 0
          while j < 2 and level + reset * rate / per < capacity do
            reset = reset + 1
            j = j + 1
          end
        end
        local v -- encode
        if level % 1 == 0 and level ~= 0 and level < 2 ^ 53 and level > -2 ^ 53 then
          v = string.format('%d %d', level, updated) -- the text '%.17g %d' makes of it
        else
          v = string.format('%.17g %d', level, updated)
        end
        if updated % 1 == 0 then
          if encodedCount >= encodedMax then
            encodedLevel, encodedUpdated, encodedCount = {}, {}, 0
          end
          encodedLevel[v], encodedUpdated[v], encodedCount = level, updated, encodedCount + 1
        end
        local ms = floor((updated + reset - now) / 1000) + 1000 -- put
        redis.call('SET', key, v, 'PX', pxText(ms))
      end
    end
  end
  return {1}
end

-- @entry: the script's work; a Redis Functions library runs it as a function.
floor = math.floor
local lone = rcShapeOf(ARGV[1])
if lone then
  return reconcileLone(lone, KEYS, ARGV)
end
local now = clock(ARGV[1])
local dedupFor, voidFor = ARGV[2], ARGV[3]
local nl = digits[ARGV[4]] or ARGV[4] + 0
local ns = digits[ARGV[5]] or ARGV[5] + 0
local nh = digits[ARGV[6]] or ARGV[6] + 0

-- Every limit as numbers (limitOf: capacity, rate, per, windowStart,
-- windowEnd, then its kind): limit i is ARGV[6 + i].
local limits = {}
for l = 1, nl do
  limits[l] = limitOf(ARGV[6 + l])
end

-- Every marker set of mode 'h' and the ids of its entries, in entry order.
local sets = {}
local a = 7 + nl
for h = 1, nh do
  local n = digits[ARGV[a + 1]] or ARGV[a + 1] + 0
  sets[h] = {KEYS[digits[ARGV[a]] or ARGV[a] + 0], a + 2, n, a + 2, false, {}}
  a = a + 2 + n
end

-- Every shape: its mode, its marker set (mode 'h': its record; mode 'w':
-- the taken set's key; else false), its delta count, its deltas' bucket
-- keys and limits, its groups, and (mode 'w') the voided set's key. Every bucket key once, in order of first use (a shape's keys are
-- those of its first entry, so this is the order of the entries' first
-- use).
local shapes, order, view = {}, {}, {}
for s = 1, ns do
  local mode, set, voids = ARGV[a], false, false
  a = a + 1
  if mode == 'h' then
    set = sets[digits[ARGV[a]] or ARGV[a] + 0]
    a = a + 1
  elseif mode == 'w' then
    set = KEYS[digits[ARGV[a]] or ARGV[a] + 0]
    voids = KEYS[digits[ARGV[a + 1]] or ARGV[a + 1] + 0]
    a = a + 2
  end
  local count = digits[ARGV[a]] or ARGV[a] + 0
  a = a + 1
  local keys, lims = {}, {}
  for i = 1, count do
    local key = KEYS[digits[ARGV[a]] or ARGV[a] + 0]
    keys[i], lims[i] = key, limits[digits[ARGV[a + 1]] or ARGV[a + 1] + 0]
    a = a + 2
    if not view[key] then
      view[key] = true
      order[#order + 1] = key
    end
  end
  shapes[s] = {mode, set, count, keys, lims, {}, voids}
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
-- SMISMEMBER per set of several entries (its SEEN is true by id for
-- those). A set of one entry (a lone reconciliation) is asked nothing
-- here: its entry's SADD tells.
for _, set in ipairs(sets) do
  local s = {}
  local from, n = set[FROM], set[IDS]
  if n > 1 then
    local got = redis.call('SMISMEMBER', set[SETKEY], unpack(ARGV, from, from + n - 1))
    for i = 1, n do
      if got[i] == 1 then
        s[ARGV[from + i - 1]] = true
      end
    end
  end
  set[SEEN] = s
end

local reply, groups = {}, {}
while a <= #ARGV do
  local shape = shapes[digits[ARGV[a]] or ARGV[a] + 0]
  local mode, set, count = shape[1], shape[2], shape[3]
  local run = digits[ARGV[a + 1]] or ARGV[a + 1] + 0
  a = a + 2
  for _ = 1, run do
    local marker, id = false, false
    if markerOf[mode] then
      marker = KEYS[digits[ARGV[a]] or ARGV[a] + 0]
      a = a + 1
    end
    local applies = true
    if mode == 'h' then
      local at = set[NEXT]
      id, set[NEXT] = ARGV[at], at + 1
      if set[IDS] == 1 then
        applies = redis.call('SADD', set[SETKEY], id) == 1
        if applies then
          redis.call('PEXPIRE', set[SETKEY], dedupFor)
        end
      else
        local s = set[SEEN]
        applies = not s[id]
        if applies then
          s[id] = true
          local f = set[FRESH]
          f[#f + 1] = id
        end
      end
    elseif mode == 'w' then
      id = ARGV[a]
      a = a + 1
      -- As 'v', the take counted as 't' when a batch recorded it in its
      -- taken set. (Written as ifs: gopher-lua, miniredis's Lua, gave true
      -- for "not voided and redis.call(...) == 1" with voided true.)
      local stored = redis.call('GET', marker)
      local mark = stored
      if mark ~= 'v' and mark ~= 't' then
        if redis.call('SISMEMBER', set, id) == 1 then
          mark = 't'
        end
      end
      local nextMark, refund = voidMark(mark)
      if stored ~= nextMark then
        redis.call('SET', marker, nextMark, 'PX', voidFor)
      end
      redis.call('SADD', shape[7], id)
      redis.call('PEXPIRE', shape[7], voidFor)
      applies = refund
    elseif mode == 'v' then
      local mark = redis.call('GET', marker)
      local nextMark, refund = voidMark(mark)
      if mark ~= nextMark then
        redis.call('SET', marker, nextMark, 'PX', voidFor)
      end
      applies = refund
    elseif mode == 'r' then
      applies = redis.call('SET', marker, '1', 'NX', 'PX', dedupFor) ~= false
    end
    reply[#reply + 1] = applies and 1 or 0
    if applies then
      local keys, lims, gs = shape[4], shape[5], shape[6]
      for i = 1, count do
        local units = ARGV[a + i - 1] + 0
        local g = gs[i]
        if not g then
          local limit = lims[i]
          local c = view[keys[i]]
          if limit[6] == 'c' then
            local holder = id or marker and holderOf(marker)
            if units < 0 and holder and not c[FOUND] and not c[DIRTY] then
              redis.call('ZREM', keys[i], holder)
            end
          else
            g = c[limit]
            if not g then
              g = {c, limit, 0, 0}
              c[limit] = g
              groups[#groups + 1] = g
            end
            gs[i] = g
          end
        end
        if g then
          if units < 0 then
            g[3] = g[3] + units
          else
            g[4] = g[4] + units
          end
        end
      end
    end
    a = a + count
  end
end

-- The markers of the ids applied now, one SADD per set, which then lives
-- dedupFor ms more (every marker at least dedupFor after its write).
for _, set in ipairs(sets) do
  local f = set[FRESH]
  if #f > 0 then
    redis.call('SADD', set[SETKEY], unpack(f))
    redis.call('PEXPIRE', set[SETKEY], dedupFor)
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
