-- take.lua: the two-phase take over all of one request's buckets, token
-- buckets and quotas together.
--
-- KEYS[1]   when ARGV[3] > 0: the take marker of the request id, in the same
--           slot as the buckets ("llmguard:{<their hash tag>}::tk:<request
--           id>"): 't' once a take of the id committed here, 'v' once the id
--           was voided (reconcile.lua in void mode); missing: neither.
-- KEYS[m+i] bucket i (m = 1 with a marker, else 0), narrowest first; in
--           Redis Cluster all KEYS share a slot.
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME: one clock for every proxy node.
-- ARGV[2]   '1' commits (a take); '0' only checks (phase 1, writes nothing);
--           't' commits a take whose buckets are all token buckets, sent in
--           the lone layout (takeLone, below): ARGV[3] as here, then 2 ARGV
--           per bucket, its limit as one text ("capacity rate per 0 0",
--           core.lua's limitOf) and its cost; the reply is the same.
-- ARGV[3]   how long the take marker lives, ms (the void window); '0': no
--           marker (no request id, or a check).
-- ARGV[6i-2] .. ARGV[6i+3]
--           capacity (units), rate (units per per), per (µs), windowStart
--           (µs), windowEnd (µs) and cost (units, >= 0) of bucket i: a
--           token bucket when windowEnd is 0 (windowStart 0 too), a quota of
--           capacity units in [windowStart, windowEnd) when windowEnd > 0
--           (rate and per 0, unused), a window counter of capacity units
--           per window of per when windowEnd is -1 (sliding window) or -2
--           (fixed window; rate 0 and windowStart unused). The caller has validated them
--           (bucket.Limit.Validate); keys are distinct. An in-flight limit
--           (bucket.Limit.Concurrent) sends rate 0 and windowEnd 0, per its
--           slot lease (µs) and cost 0 or 1: a cost of 1 needs the marker,
--           whose request id becomes the slot's holder.
--
-- Reply, all integers: {-1} alone when the marker says voided (the take
-- applies nothing, writes nothing); otherwise
--   [1] allowed     1 when every bucket could pay (and, committing, paid), else 0
--   [2] deniedBy    0-based index of the first too-large bucket if any, else of
--                   the first bucket that could not pay; -1 when allowed
--   [3] tooLarge    1 when the denying bucket's cost exceeds its capacity
--   [4] retryAfter  µs: the longest wait among the short buckets (a quota:
--                   until its window ends); 0 when allowed or too large
--   [3+2i]          remaining of bucket i: its level rounded down (negative in
--                   debt), after the take, or after the refill on a denial; a
--                   quota: capacity - used (negative when charged beyond it)
--   [4+2i]          reset of bucket i: µs until it is full again; a quota: µs
--                   until its window ends; a sliding window: µs until nothing
--                   it counts weighs; a fixed window: µs until its window ends
--   [4+2n+i]        only when a bucket is a window counter: the start (µs) of
--                   the window bucket i counted in (0 for other buckets)
--
-- State: one string per bucket. A token bucket: '<level> <updated>', level
-- in units with 17 significant digits (it round-trips a double exactly),
-- updated in µs; a missing key is a full bucket; a bucket left at capacity
-- is deleted; every key written expires 1s past the instant it would be full
-- again. A quota: 'q <used> <window>', used a whole number of units, window
-- the start of the window it counts, µs; a missing key has nothing used; a
-- quota left with nothing used is deleted; a key written for its own window
-- expires quotaMargin (1h) past the window's end, one written for a later
-- window keeps its TTL. A window counter: 'w <prev> <cur> <start>', the
-- units taken in the previous and the current window (whole numbers) and
-- the current window's start, µs; a missing key has nothing taken; a
-- counter left with nothing is deleted; a key written expires 1s after the
-- last instant it weighs (its window's end, a sliding window's next
-- window's end). A key holding the other kind's state (the rule
-- changed kind), or any value these scripts do not write, is read as
-- missing. An in-flight limit: a sorted set of holder request ids scored
-- by expiry (µs), counting those after now; a take of cost 1 drops expired
-- holders, adds its own (expiry now + lease) and sets the key to expire 1s
-- after it; a key holding a string (another kind) has no holders and is
-- replaced. A committed take with a marker sets it
-- to 't', expiring after ARGV[3] ms; a denial or a check leaves it alone.
--
-- takebatch.lua runs the takes of several requests in one script.
--
-- Redis commands: TIME (unless ARGV[1] pins now), one MGET of every KEYS
-- (the marker with the buckets), and when committing one SET of the marker
-- and one SET or DEL per bucket whose key changes. A denial or a check
-- reads only.
--
-- The functions mirror bucket/tokenbucket.go and bucket/quota.go line by
-- line, under the same names; those reconcile.lua needs too live in
-- core.lua, inserted at the "-- @core" line below.

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
  -- (Patched from the original, as core.lua's hold now: the key keeps the
  -- longer TTL, so that the comparison checks the layout, not that rule.)
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

-- check is phase one for one refilled bucket: can it pay cost now, and can
-- it ever (cost above capacity never passes). A cost of zero always passes.
local function check(level, capacity, cost)
  if cost > capacity then
    return false, true
  end
  return cost == 0 or level >= cost, false
end

-- takeMarked is what a take does with its request id's marker ('t' taken,
-- 'v' voided, false when missing): it applies nothing when the id was
-- voided; otherwise it runs as usual, and a committed take sets the marker
-- to 't'.
local function takeMarked(mark)
  return mark == 'v'
end

-- floorUnits rounds level down to whole units, saturating at the int64 range
-- (Redis turns a reply number into an integer by a C cast).
local function floorUnits(level)
  local f = floor(level)
  if f >= 2 ^ 63 then
    return 2 ^ 63 - 1024 -- the largest double below 2^63
  elseif f <= -2 ^ 63 then
    return -2 ^ 63
  end
  return f
end

-- checkQuota is phase one for one rolled quota: can cost fit in the window
-- now, and can it ever (cost above capacity fits no window). A cost of zero
-- always passes.
local function checkQuota(used, capacity, cost)
  if cost > capacity then
    return false, true
  end
  return cost == 0 or used <= capacity - cost, false
end

-- read returns the stored values of keys (one MGET); takebatch.lua reads
-- them from its batch's state instead.
local function read(keys)
  return redis.call('MGET', unpack(keys))
end

-- mark sets a committed take's marker to 't' for ttl ms.
local function mark(key, ttl)
  redis.call('SET', key, 't', 'PX', ttl)
end

-- write stores what put or putQuota returned for key: a TTL in ms, true
-- to keep the key's TTL, false to delete it, nil to write nothing; the
-- value is encodeIt(a, b, c), made only when it is written.
local function write(key, how, encodeIt, a, b, c)
  if how == nil then
    return
  elseif not how then
    redis.call('DEL', key)
  elseif how == true then
    redis.call('SET', key, encodeIt(a, b, c), 'KEEPTTL')
  else
    redis.call('SET', key, encodeIt(a, b, c), 'PX', how)
  end
end

-- now (µs) and commit (whether the take commits) are the call's: the entry
-- below sets them (takebatch.lua's entry sets its own), so that the
-- functions above are made once in a Redis Functions library and reused.
local now, commit

-- checkWindowAt is phase one of a take from one window counter: slide
-- into now's window, then check cost against the weighted count.
local function checkWindowAt(prev, cur, start, per, capacity, now, cost, sliding)
  prev, cur, start = slide(prev, cur, start, per, now, sliding)
  local ok, tooLarge = checkQuota(weigh(prev, cur, start, per, now, sliding), capacity, cost)
  local short = 0
  if not ok and not tooLarge then
    short = windowWait(prev, cur, start, per, now, capacity, cost, sliding)
  end
  return prev, cur, start, ok, tooLarge, short
end

-- windows appends to reply, when a bucket is a window counter (hasWindow),
-- the start of the window each of the n buckets counted in (0 for the
-- others, seen[i][10] is nil), and returns reply.
local function windows(reply, n, seen, hasWindow)
  if hasWindow then
    for i = 1, n do
      reply[4 + 2 * n + i] = seen[i][10] or 0
    end
  end
  return reply
end

-- The phase-1 state of each bucket of the lone take running (takeLone),
-- by index, reused from call to call: capacity, rate, per, level, updated,
-- found and cost.
local loneCap, loneRate, lonePer, loneLevel, loneUpdated, loneFound, loneCost = {}, {}, {}, {}, {}, {}, {}

-- takeLone is take.lua's body for a committing take whose buckets are all
-- token buckets, sent in the lone layout (ARGV[2] 't'): ARGV[1] now,
-- ARGV[3] the marker TTL, then per bucket i its limit as one text at
-- ARGV[2i+2] (core.lua's limitOf: converted once per text, not once per
-- call) and its cost at ARGV[2i+3]. It is the body step for step for that kind, as
-- takebatch.lua's takeTokens is: the same core functions in the same order
-- (parse, load, refill, check, wait, put, floorUnits; the marker's SET
-- before the buckets' writes), the same reply and the same commands,
-- without the body's per-bucket dispatch and seen tables, and with two
-- ARGV per bucket instead of six (Redis makes a Lua string of each).
local function takeLone(KEYS, ARGV)
  now = clock(ARGV[1])
  local ttl, m = ARGV[3], 0
  if ttl ~= '0' then
    m = 1
  end
  local stored = read(KEYS)
  if m == 1 and takeMarked(stored[1]) then
    return {-1}
  end
  local n = #KEYS - m
  local reply = {1, -1, 0, 0, nil, nil, nil, nil, nil, nil}
  local firstLarge, slowest, retry = -1, -1, 0
  for i = 1, n do
    local limit, cost = limitOf(ARGV[2 + 2 * i]), ARGV[3 + 2 * i]
    local capacity, rate, per = limit[1], limit[2], limit[3]
    cost = digits[cost] or cost + 0
    local kind, x, y = parse(stored[m + i])
    local level, updated, found = load(kind, x, y, capacity, now)
    level, updated = refill(level, updated, capacity, rate, per, now)
    loneCap[i], loneRate[i], lonePer[i] = capacity, rate, per
    loneLevel[i], loneUpdated[i], loneFound[i], loneCost[i] = level, updated, found, cost
    local ok, tooLarge = check(level, capacity, cost)
    if tooLarge then
      if firstLarge < 0 then
        firstLarge = i - 1
      end
    elseif not ok then
      local short = wait(level, cost, rate, per)
      if slowest < 0 or short > retry then -- the longest wait, the first among equals
        slowest, retry = i - 1, short
      end
    end
  end
  if firstLarge >= 0 or slowest >= 0 then
    reply[1] = 0
    if firstLarge >= 0 then
      reply[2], reply[3] = firstLarge, 1
    else
      reply[2], reply[4] = slowest, retry
    end
    for i = 1, n do
      local level = loneLevel[i]
      reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), wait(level, loneCap[i], loneRate[i], lonePer[i])
    end
    return reply
  end
  if m == 1 then
    mark(KEYS[1], ttl)
  end
  for i = 1, n do
    local capacity, rate, per = loneCap[i], loneRate[i], lonePer[i]
    local level, updated = loneLevel[i] - loneCost[i], loneUpdated[i]
    local reset = wait(level, capacity, rate, per)
    write(KEYS[m + i], put(loneFound[i], level, updated, capacity, reset, now), encode, level, updated)
    reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), reset
  end
  return reply
end

-- @entry: take.lua's own; takebatch.lua's entry sets now and commit itself.
floor = math.floor
if ARGV[2] == 't' then
  return takeLone(KEYS, ARGV)
end
now, commit = clock(ARGV[1]), ARGV[2] == '1'
-- @body: one request's take; takebatch.lua runs it once per request.
local m = 0
if ARGV[3] ~= '0' then
  m = 1
end
local stored = read(KEYS)
if m == 1 and takeMarked(stored[1]) then
  return {-1}
end

local n = #KEYS - m
-- Room for three buckets' remaining and reset, and three seen: tables built
-- with room grow no more (a take of up to three buckets, the common case,
-- rehashes neither); the nils are not part of the reply.
local reply = {1, -1, 0, 0, nil, nil, nil, nil, nil, nil}
local seen = {nil, nil, nil}

-- Phase 1: refill every token bucket, roll every quota into its window, and
-- check each; write nothing.
local firstLarge, slowest = -1, -1
local retry = 0
local hasWindow = false
for i = 1, n do
  local a = 6 * i - 2
  local capacity, rate, per = ARGV[a] + 0, ARGV[a + 1] + 0, ARGV[a + 2] + 0
  local windowStart, windowEnd, cost = ARGV[a + 3] + 0, ARGV[a + 4] + 0, ARGV[a + 5] + 0
  local kind, x, y, z = parse(stored[m + i])
  local ok, tooLarge, short
  local limitKind = kindOf(rate, windowEnd)
  if limitKind == 'c' then
    local live = liveSlots(KEYS[m + i], stored[m + i], now)
    seen[i] = {live, 0, stored[m + i] ~= false, capacity, rate, per, windowStart, windowEnd, cost}
    ok, tooLarge = checkSlots(live, capacity, cost)
    short = slotRetry
  elseif limitKind == 'w' then
    local prev, cur, start, found = loadWindow(kind, x, y, z)
    prev, cur, start, ok, tooLarge, short = checkWindowAt(prev, cur, start, per, capacity, now, cost, isSliding(windowEnd))
    seen[i] = {prev, cur, found, capacity, rate, per, windowStart, windowEnd, cost, start}
    hasWindow = true
  elseif limitKind == 'q' then
    local used, window, found = loadQuota(kind, x, y, windowStart)
    used, window = roll(used, window, windowStart, windowEnd)
    seen[i] = {used, window, found, capacity, rate, per, windowStart, windowEnd, cost}
    ok, tooLarge = checkQuota(used, capacity, cost)
    short = untilEnd(windowEnd, now)
  else
    local level, updated, found = load(kind, x, y, capacity, now)
    level, updated = refill(level, updated, capacity, rate, per, now)
    seen[i] = {level, updated, found, capacity, rate, per, windowStart, windowEnd, cost}
    ok, tooLarge = check(level, capacity, cost)
    if not ok and not tooLarge then
      short = wait(level, cost, rate, per)
    end
  end
  if tooLarge then
    if firstLarge < 0 then
      firstLarge = i - 1
    end
  elseif not ok then
    if slowest < 0 or short > retry then -- the longest wait, the first among equals
      slowest, retry = i - 1, short
    end
  end
end

if firstLarge >= 0 or slowest >= 0 then
  reply[1] = 0
  if firstLarge >= 0 then
    reply[2], reply[3] = firstLarge, 1
  else
    reply[2], reply[4] = slowest, retry
  end
end

if reply[1] == 0 or not commit then
  for i = 1, n do
    local s = seen[i]
    local capacity, rate, per, windowEnd = s[4], s[5], s[6], s[8]
    if kindOf(rate, windowEnd) == 'c' then
      reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(capacity - s[1]), slotReset(s[1], capacity)
    elseif windowEnd < 0 then
      local sliding = isSliding(windowEnd)
      reply[3 + 2 * i] = floorUnits(capacity - weigh(s[1], s[2], s[10], per, now, sliding))
      reply[4 + 2 * i] = windowReset(s[1], s[2], s[10], per, now, sliding)
    elseif windowEnd > 0 then
      local used = s[1]
      reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(capacity - used), untilEnd(windowEnd, now)
    else
      local level = s[1]
      reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), wait(level, capacity, rate, per)
    end
  end
  return windows(reply, n, seen, hasWindow)
end

-- Phase 2: every bucket can pay; commit every cost.
if m == 1 then
  mark(KEYS[1], ARGV[3])
end
for i = 1, n do
  local s = seen[i]
  local capacity, rate, per, windowStart, windowEnd, cost = s[4], s[5], s[6], s[7], s[8], s[9]
  local limitKind = kindOf(rate, windowEnd)
  if limitKind == 'c' then
    local live = s[1]
    if cost > 0 then
      if s[3] then
        redis.call('DEL', KEYS[m + i])
      end
      hold(KEYS[m + i], holderOf(KEYS[1]), now + per, now)
      live = live + 1
    end
    reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(capacity - live), slotReset(live, capacity)
  elseif limitKind == 'w' then
    local sliding, start = isSliding(windowEnd), s[10]
    local cur = charge(s[2], cost)
    write(KEYS[m + i], putWindow(s[3], s[1], cur, start, per, now, sliding), encodeWindow, s[1], cur, start)
    reply[3 + 2 * i] = floorUnits(capacity - weigh(s[1], cur, start, per, now, sliding))
    reply[4 + 2 * i] = windowReset(s[1], cur, start, per, now, sliding)
  elseif limitKind == 'q' then
    local used = charge(s[1], cost)
    write(KEYS[m + i], putQuota(s[3], used, s[2], windowStart, windowEnd, now), encodeQuota, used, s[2])
    reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(capacity - used), untilEnd(windowEnd, now)
  else
    local level = s[1] - cost
    local reset = wait(level, capacity, rate, per)
    write(KEYS[m + i], put(s[3], level, s[2], capacity, reset, now), encode, level, s[2])
    reply[3 + 2 * i], reply[4 + 2 * i] = floorUnits(level), reset
  end
end
return windows(reply, n, seen, hasWindow)
