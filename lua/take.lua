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
--           Redis TIME: one clock for every proxy node. A text opening with
--           "L " is instead the shape of a committing take whose buckets are
--           all token buckets, sent in the lone layout (takeLone, below):
--           "L <marker TTL> <capacity> <rate> <per> ..." (ARGV[3] below,
--           then each bucket's limit), then ARGV[2] the n buckets' costs
--           packed (8 bytes each, as core.lua's unitsOf reads them) and, in
--           tests only, ARGV[3] now; its reply is this one, except an
--           allowed take's: where Redis has the struct library, each
--           bucket's level before the take (after the refill), n doubles
--           packed as takebatch.lua packs its reply (package bucket works
--           out the rest, runLevels); elsewhere the 2n numbers after the
--           first four.
-- ARGV[2]   '1' commits (a take); '0' only checks (phase 1, writes nothing).
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
--                   the short bucket whose wait is retryAfter (the longest;
--                   the first of those that wait as long); -1 when allowed
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
--   [3+3n+2i], [4+3n+2i]
--                   only in an allowed committed take when a bucket is a
--                   sliding window: when bucket i is one, its prev and cur
--                   before the take (slid to now's window, whole units),
--                   else 0 and 0: package bucket works out from them its
--                   status before the take (what a take of cost zero read
--                   at now), which it reports for a slot group it refunds
--                   when another group denied the request (a sliding
--                   window's is no sum of the cost and the reply after the
--                   take; the other kinds' it works out from the reply)
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
-- Redis commands: TIME (unless now is pinned: ARGV[1] in the single
-- layout, ARGV[3] in the lone one), one MGET of every KEYS
-- (the marker with the buckets), and when committing one SET of the marker
-- and one SET or DEL per bucket whose key changes (the lone layout sends
-- each SET … PX as PSETEX, the same write: one argument fewer to make). A
-- denial or a check reads only.
--
-- The functions mirror bucket/tokenbucket.go and bucket/quota.go line by
-- line, under the same names; those reconcile.lua needs too live in
-- core.lua, inserted at the "-- @core" line below.

-- @core: the shared core (lua/core.lua) is inserted here by package lua.

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

-- The shapes of lone takes read from their text (loneShapeOf), by text,
-- kept from call to call as core.lua's limits are; at most loneShapesMax,
-- then emptied.
local loneShapes, loneShapesCount, loneShapesMax = {}, 0, 256

-- loneShapeOf returns the shape a lone take sends as ARGV[1]: the text
-- "L <ttl> <capacity> <rate> <per> ..." (ttl the marker's TTL in ms, '0'
-- for none, then three decimal integers, each > 0, per token bucket,
-- narrowest first) read as {ttl, n, m, capacity1, rate1, per1, ...} (n the
-- buckets, m 1 with a marker, else 0), a table the caller must not change
-- (it is kept for the next call with the same text: a hit is one lookup).
-- A text that does not open with "L " is not a shape: nil (the single
-- layout's ARGV[1] is now, '' or digits). A text of another form after
-- "L " is an error.
local function loneShapeOf(text)
  local s = loneShapes[text]
  if s then
    return s
  end
  if string.sub(text, 1, 2) ~= 'L ' then
    return nil
  end
  local ttl, at = string.match(text, '^L (%d+)()')
  if not ttl then
    error('llmguard: bad lone shape ' .. text)
  end
  s = {ttl, 0, 0}
  if ttl ~= '0' then
    s[3] = 1
  end
  local n = 0
  while at <= #text do
    local c, r, p, next = string.match(text, '^ (%d+) (%d+) (%d+)()', at)
    if not c then
      error('llmguard: bad lone shape ' .. text)
    end
    c, r, p = c + 0, r + 0, p + 0
    if c <= 0 or r <= 0 or p <= 0 then
      error('llmguard: bad lone shape ' .. text)
    end
    s[4 + 3 * n], s[5 + 3 * n], s[6 + 3 * n] = c, r, p
    n, at = n + 1, next
  end
  if n == 0 then
    error('llmguard: bad lone shape ' .. text)
  end
  s[2] = n
  if loneShapesCount >= loneShapesMax then
    loneShapes, loneShapesCount = {}, 0
  end
  loneShapes[text], loneShapesCount = s, loneShapesCount + 1
  return s
end

-- loneFormats holds struct's format of k doubles, by k: a lone take's
-- costs (k = n) and an allowed one's reply (k = 2n), made at the first
-- take of n buckets and kept (one or two per count of buckets a rule set
-- gives a take: a few hundred at most).
local loneFormats = {}

-- call, format and spread are redis.call, string.format and unpack, read
-- once at the entry (a library's load may not read globals): a call then
-- reads an upvalue, not a global (and its field).
local call, format, spread

-- usecPad[k] is the zeros that pad a TIME microseconds text of k digits
-- to 6: the text of now (µs), seconds * 1000000 + microseconds, as '%d'
-- makes it, is the seconds' text, then the microseconds' text padded to
-- six digits (TIME gives both as decimal texts without leading zeros,
-- the microseconds below 1000000, and the seconds above 0).
local usecPad = {'00000', '0000', '000', '00', '0', ''}

-- @unroll
-- takeLoneRun@W is the rest of takeLone for a take of @W buckets, once
-- the clock is read and the keys are (stored: MGET's values; tail: " <now>"
-- as '%d' writes it, nil until made when now is pinned; then the @W costs,
-- as struct.unpack gives them, and whatever follows, unread): each
-- bucket's limit, state and result in Lua locals of its own, no table
-- between the two phases, none for the costs either.
local function takeLoneRun@W(s, KEYS, m, stored, tail,
  -- @each
  cost@i,
  -- @end
  _)
  local firstLarge, slowest, retry = -1, -1, 0
  -- @each
  local capacity@i, rate@i, per@i = s[3 * @i + 1], s[3 * @i + 2], s[3 * @i + 3]
  local level@i, updated@i, found@i
  do
    local v = stored[m + @i]
    if v then -- parse and load: a value this library wrote by one lookup
      level@i = encodedLevel[v]
      if level@i then
        updated@i, found@i = encodedUpdated[v], true
      else
        local kind, x, y = parse(v)
        level@i, updated@i, found@i = load(kind, x, y, capacity@i, now)
      end
    else
      level@i, updated@i, found@i = capacity@i, now, false
    end
    if now > updated@i then -- refill
      level@i = level@i + (now - updated@i) * rate@i / per@i
      updated@i = now
    end
    if level@i > capacity@i then
      level@i = capacity@i
    end
    if cost@i > capacity@i then -- check: too large
      if firstLarge < 0 then
        firstLarge = @i - 1
      end
    elseif not (cost@i == 0 or level@i >= cost@i) then -- check: short
      local short = wait(level@i, cost@i, rate@i, per@i)
      if slowest < 0 or short > retry then -- the longest wait, the first among equals
        slowest, retry = @i - 1, short
      end
    end
  end
  -- @end
  if firstLarge >= 0 or slowest >= 0 then
    local reply = {0, -1, 0, 0}
    if firstLarge >= 0 then
      reply[2], reply[3] = firstLarge, 1
    else
      reply[2], reply[4] = slowest, retry
    end
    -- @each
    reply[3 + 2 * @i], reply[4 + 2 * @i] = floorUnits(level@i), wait(level@i, capacity@i, rate@i, per@i)
    -- @end
    return reply
  end
  if m == 1 then -- mark
    call('PSETEX', KEYS[1], s[1], 't')
  end
  -- @each
  do
    local capacity, rate, per = capacity@i, rate@i, per@i
    local level, updated = level@i - cost@i, updated@i
    -- put(found, level, updated, capacity, wait(level, capacity, rate, per), now), then write
    if level >= capacity then
      if found@i then
        call('DEL', KEYS[m + @i])
      end
    else
      local v -- encode: the text '%.17g %d' makes of level and updated
      if updated ~= now then -- a clock that stepped back kept updated
        v = format('%.17g %d', level, updated)
      else
        if not tail then -- a pinned now (tests): the first write makes it
          tail = ' ' .. format('%d', now)
        end
        if level % 1 == 0 and level ~= 0 and level < 2 ^ 53 and level > -2 ^ 53 then
          v = format('%d', level) .. tail -- the text '%.17g' makes of it
        else
          v = format('%.17g', level) .. tail
        end
      end
      if updated % 1 == 0 then
        if encodedCount >= encodedMax then
          encodedLevel, encodedUpdated, encodedCount = {}, {}, 0
        end
        encodedLevel[v], encodedUpdated[v], encodedCount = level, updated, encodedCount + 1
      end
      -- The TTL, put's floor((updated + reset - now) / 1000) + 1000 ms,
      -- reset being wait(level, capacity, rate, per) (level < capacity
      -- here): wait's floor(q), raised by its steps by at most 2. Each
      -- operation on doubles is monotonic, so when floor(q) and floor(q) +
      -- 2 give the same whole x, so does every reset between: the steps
      -- run only when they could change the TTL (the reset itself goes to
      -- package bucket as the level, see the reply).
      local x
      local q = (capacity - level) * per / rate -- > 0, or NaN
      if q >= maxWait then -- floor(q) >= maxWait exactly when q is
        x = (updated + maxWait - now) / 1000
      else
        local reset = q - q % 1 -- floor(q), without a call (see core.lua's floor)
        x = (updated + reset - now) / 1000 -- finite, or NaN
        local x2 = (updated + (reset + 2) - now) / 1000
        if x - x % 1 ~= x2 - x2 % 1 then -- wait's steps (NaN comes here too)
          local j = 0
          while j < 2 and level + reset * rate / per < capacity do
            reset = reset + 1
            j = j + 1
          end
          x = (updated + reset - now) / 1000
        end
      end
      local ms = x - x % 1 + 1000 -- floor(x) + 1000
      call('PSETEX', KEYS[m + @i], pxTexts[ms + 0.5] or pxText(ms), v) -- pxText's cache read inline
    end
  end
  -- @end
  if structPack then -- packed: each bucket's level before the take, as takebatch.lua's runs reply
    local f = loneFormats[@W]
    if not f then
      f = '<' .. string.rep('d', @W)
      loneFormats[@W] = f
    end
    return structPack(f,
    -- @each
      level@i,
    -- @end
      nil) -- a value past the format's, which struct.pack leaves unread (an argument list takes no trailing comma)
  end
  return { -- no struct (miniredis): each bucket's remaining units and reset, as the single layout's
  -- @each
    floorUnits(level@i - cost@i), wait(level@i - cost@i, capacity@i, rate@i, per@i),
  -- @end
  }
end
-- @unroll end

-- takeLone is take.lua's body for a committing take whose buckets are all
-- token buckets, sent in the lone layout: ARGV[1] the take's shape (its
-- marker TTL and its limits as one text, loneShapeOf), ARGV[2] the n
-- buckets' costs packed (unitsOf's bytes: one ARGV, not n, and no strtod),
-- and ARGV[3], only in tests, now (µs; absent: Redis TIME). It is the
-- body step for step for that kind, as takebatch.lua's takeTokens is: the
-- same core steps in the same order (clock, parse, load, refill, check,
-- put, encode; the marker's SET before the buckets'
-- writes), the same commands (a SET … PX sent as PSETEX, its equal) and
-- the same stored values and TTLs, without the body's per-bucket
-- dispatch and seen tables, with 2 ARGV instead of 6n + 3 (Redis makes a
-- Lua string of each), and with the steps run on every bucket inlined
-- in Lua locals, one takeLoneRun function per count of buckets (each the
-- core function's own expressions in its own order, so the same doubles,
-- under the same names in comments: a Lua call costs Redis 7.0's
-- interpreter some 1k instructions, a table read some 70, a write
-- 200–500, by callgrind); the rare steps (a denial's wait, a level beyond
-- the int64 range, a value no script of this library wrote) call the core
-- functions. Its reply is take.lua's, except that an allowed take's
-- (whose first four numbers are always 1, -1, 0, 0) is, where Redis has
-- struct, each bucket's level before the take, packed by struct.pack (n
-- doubles): package bucket's lone take works out each bucket's remaining
-- units and reset from them (runLevels, the arithmetic of a batch's run,
-- which mirrors this one), so the script skips the units and runs wait's
-- steps only when they could change a TTL; where it has not (miniredis)
-- the 2n numbers after the first four (each bucket's remaining and
-- reset). Package bucket puts the first four back. bucket's
-- TestTakeLoneMatchesGeneric and TestTakeLoneMatchesOld compare it with
-- the generic body and with take.lua as it was before this layout. A take
-- of more buckets than takeLoneRun has functions (lua.LoneBuckets) is an
-- error: package bucket sends it in the single layout.
local function takeLone(s, KEYS, ARGV)
  local n, m = s[2], s[3]
  local packed = ARGV[2]
  if #KEYS ~= m + n or not packed or #packed ~= 8 * n then
    error('llmguard: lone take of ' .. #KEYS .. ' KEYS, ' .. #ARGV .. ' ARGV for ' .. n .. ' buckets')
  end
  if structUnpack == nil then
    readStruct()
  end
  local pinned, tail = ARGV[3], nil
  if pinned then -- clock(pinned)
    now = pinned + 0 -- tail is made at the first write (a pinned now may be any number)
  else
    local t = call('TIME')
    local sec, usec = t[1], t[2]
    if sec ~= clockText then
      clockText, clockSeconds = sec, sec * 1000000
    end
    now = clockSeconds + usec
    tail = ' ' .. sec .. usecPad[#usec] .. usec -- ' ' .. format('%d', now), see usecPad
  end
  local stored = call('MGET', spread(KEYS))
  if m == 1 and stored[1] == 'v' then -- takeMarked
    return {-1}
  end
  local run = takeLoneRun[n]
  if not run then
    error('llmguard: a lone take of ' .. n .. ' buckets (at most ' .. #takeLoneRun .. ')')
  end
  if structUnpack then -- unitsOf(packed), its common case inline: the costs go to run's arguments, no table
    local f = loneFormats[n]
    if not f then
      f = '<' .. string.rep('d', n)
      loneFormats[n] = f
    end
    return run(s, KEYS, m, stored, tail, structUnpack(f, packed)) -- the n costs, then the next position
  end
  return run(s, KEYS, m, stored, tail, spread(unitsOf(packed)))
end

-- @entry: take.lua's own; takebatch.lua's entry sets now and commit itself.
if not call then
  call, format, spread = redis.call, string.format, unpack
end
floor = math.floor
local lone = loneShapes[ARGV[1]] or loneShapeOf(ARGV[1]) -- a kept shape by one lookup, without a call
if lone then
  return takeLone(lone, KEYS, ARGV)
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
local hasWindow, hasSliding = false, false
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
    if windowEnd == -1 then -- isSliding(windowEnd), without a call
      hasSliding = true
    end
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
windows(reply, n, seen, hasWindow)
if hasSliding then -- each sliding window's counts before the take (package bucket's statusesBefore)
  for i = 1, n do
    local s = seen[i]
    if s[8] == -1 then -- isSliding(windowEnd), without a call
      reply[3 + 3 * n + 2 * i], reply[4 + 3 * n + 2 * i] = s[1], s[2]
    else
      reply[3 + 3 * n + 2 * i], reply[4 + 3 * n + 2 * i] = 0, 0
    end
  end
end
return reply
