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
--           same call. A text opening with "N " is the shape of a run of
--           m >= 2 such reconciliations, all of one epoch's marker set and
--           one shape, sent in the run layout: "N <ARGV[2] below>;<limit>;...",
--           then ARGV[2] every entry's units packed (as the last ARGV
--           below), ARGV[2 + e] the request id of entry e and, in tests
--           only, ARGV[m + 3] now; KEYS as the lone layout's (see
--           reconcileRun below). Its reply, commands and stored state are
--           this layout's for the same call too.
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
-- and last, one ARGV: every entry's units, packed (core.lua's unitsOf: 8
--           bytes a number, a little-endian double), entry after entry,
--           each entry one number per delta of its shape, in the shape's
--           order (an ARGV per number cost Redis some 1.1k instructions
--           more a number). Units, of a token bucket:
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
-- when its marker already existed (a retry: nothing changed), 2 when they
-- were applied but a quota's of them applied to nothing, its stored window
-- later than the delta's (the period moved on: see units above; the
-- batch's deltas on that quota in that window are settled as one, so every
-- applying entry with a delta in it says 2). In void mode:
-- 1 when the take marker said 't' (the take was applied: refunded now), 0
-- otherwise (no take yet: the marker is left 'v', a tombstone that makes a
-- late take apply nothing; or 'v' already: a second void), 2 as above. Either way the
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

-- @core: the shared core (lua/core.lua) is inserted here by package lua.

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
-- refill, a roll or a slide, as one such delta alone. It returns true when
-- the group is a quota's whose units (not 0) applied to nothing: its
-- stored window is later than the group's (the period moved on).
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
    elseif refund ~= 0 or spend ~= 0 then
      return true
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

-- settleTokens is settle for a token bucket's group on a view holding a
-- token bucket's state (the common case), its steps inlined: the core
-- functions' own expressions in their order (apply's refill and clamps,
-- wait, put, stage; load gives the view's state, found): the same doubles,
-- with one Lua call instead of six (a call costs Redis 7.0's interpreter
-- some 1k instructions).
local function settleTokens(c, limit, refund, spend, now)
  local capacity, rate, per = limit[1], limit[2], limit[3]
  local level, updated = c[A], c[B]
  if refund ~= 0 or spend == 0 then -- apply(refund)
    if now > updated then
      level = level + (now - updated) * rate / per
      updated = now
    end
    if level > capacity then
      level = capacity
    end
    level = level - refund
    if level > capacity then
      level = capacity
    end
  end
  if spend ~= 0 then -- apply(spend)
    if now > updated then
      level = level + (now - updated) * rate / per
      updated = now
    end
    if level > capacity then
      level = capacity
    end
    level = level - spend
    if level > capacity then
      level = capacity
    end
  end
  c[DIRTY] = true -- stage(c, put(true, level, updated, capacity, wait(level, capacity, rate, per), now), 't', level, updated)
  if level >= capacity then
    c[KIND], c[PX] = nil, false
  else
    local reset = floor((capacity - level) * per / rate) -- wait
    if reset >= maxWait then
      reset = maxWait
    else
      local j = 0
      while j < 2 and level + reset * rate / per < capacity do
        reset = reset + 1
        j = j + 1
      end
    end
    c[A], c[B], c[C] = level, updated, nil
    c[PX] = floor((updated + reset - now) / 1000) + 1000 -- put
  end
end

-- markerOf tells, for each mode, whether its entries send a marker key's
-- index (each entry its own key).
local markerOf = {r = true, v = true, w = true}

-- A marker set's record (mode 'h'): its key, the ARGV of its first id,
-- its id count, the ARGV of the id of its next entry, the ids it already
-- holds or an earlier entry applied (true by id), how many of its
-- entries applied so far.
local SETKEY, FROM, IDS, NEXT, SEEN, FRESH = 1, 2, 3, 4, 5, 6

-- makeGroups gives each delta of shape (a shape of runDeltas: no
-- in-flight limit) its group, as the batch's loop below does at an
-- entry's first applying delta: the group of its bucket's view and limit,
-- made and appended to groups when new.
local function makeGroups(shape, view, groups)
  local keys, lims, gs = shape[4], shape[5], shape[6]
  for i = 1, shape[3] do
    if not gs[i] then
      local limit = lims[i]
      local c = view[keys[i]]
      local g = c[limit]
      if not g then
        g = {c, limit, 0, 0}
        c[limit] = g
        groups[#groups + 1] = g
      end
      gs[i] = g
    end
  end
end

-- @unroll
-- runDeltas@W runs a run of entries of one shape of @W deltas, each entry
-- as the batch's loop below runs it, with each delta's group sums (its
-- refund and spend) in locals instead of the group's table: the loop's
-- per-entry dispatch on the mode and its per-delta table reads and writes
-- (the group, its sums, the set's record) are gone. Package lua makes
-- runDeltas1 to runDeltas4 from this text (lua.unroll: each delta's block
-- once per delta, its index in the names). The shape's mode is 'h' (its
-- set of more than one entry: set, its record) or 'n' (set false), its
-- keys are distinct (so each delta has a group of its own, which no other
-- delta of the run adds to) and no limit is an in-flight one (no ZREM per
-- entry). Each group's sums are read into locals at the run's first
-- applying entry (its groups made then, in delta order, as the loop makes
-- them), added to in entry order (the same additions, so the same
-- doubles) and written back after the run. It takes the run's length, u
-- (the units of U read so far: the run's first entry's are from U[u + 1])
-- and o (the reply's length), appends each entry's 1 or 0 to reply, and
-- returns u and o after the run (its entries send no ARGV of their own).
local function runDeltas@W(shape, run, u, o, ARGV, U, set, reply, view, groups)
  local gs = shape[6]
  local ready = gs[1] ~= nil
  -- @each
  local g@i, refund@i, spend@i
  if ready then
    g@i = gs[@i]
    refund@i, spend@i = g@i[3], g@i[4]
  end
  -- @end
  local seen, at, fresh = false, 0, 0
  if set then
    seen, at, fresh = set[SEEN], set[NEXT], set[FRESH]
  end
  for _ = 1, run do
    local applies = true
    if set then -- mode 'h': its set's next id, applied once
      local id = ARGV[at]
      at = at + 1
      if seen[id] then
        applies = false
      else
        seen[id], fresh = true, fresh + 1
      end
    end
    o = o + 1
    if applies then
      reply[o] = 1
      if not ready then
        makeGroups(shape, view, groups)
        ready = true
        -- @each
        g@i = gs[@i]
        refund@i, spend@i = g@i[3], g@i[4]
        -- @end
      end
      -- @each
      local units@i = U[u + @i]
      if units@i < 0 then
        refund@i = refund@i + units@i
      else
        spend@i = spend@i + units@i
      end
      -- @end
    else
      reply[o] = 0
    end
    u = u + @W
  end
  if ready then
    -- @each
    g@i[3], g@i[4] = refund@i, spend@i
    -- @end
  end
  if set then
    set[NEXT], set[FRESH] = at, fresh
  end
  return u, o
end
-- @unroll end

-- The shapes of lone reconciliations read from their text (rcShapeOf), by
-- text, kept from call to call as core.lua's limits are; at most
-- rcShapesMax, then emptied.
local rcShapes, rcShapesCount, rcShapesMax = {}, 0, 256

-- rcShapeOf returns the shape a lone reconciliation sends as ARGV[1]: the
-- text "R <dedupFor>;<limit>;<limit>..." (dedupFor the marker set's TTL in
-- ms, then each delta's limit as limitOf reads it, a token bucket's or a
-- quota's) read as {dedupFor, n, limit1, ..., limitn} (n the deltas; each
-- limit limitOf's table), a table the caller must not change (it is kept
-- for the next call with the same text: a hit is one lookup). A run of
-- reconciliations (reconcileRun) sends the same text opening with "N ":
-- its table has run set. A text that does not open with "R " or "N " is
-- not a shape: nil (the batch layout's ARGV[1] is now, '' or digits). A
-- text of another form after it, or a limit of another kind, is an error.
local function rcShapeOf(text)
  local s = rcShapes[text]
  if s then
    return s
  end
  local form = string.sub(text, 1, 2)
  if form ~= 'R ' and form ~= 'N ' then
    return nil
  end
  local ttl, at = string.match(text, '^[RN] (%d+)()')
  if not ttl then
    error('llmguard: bad lone reconciliation shape ' .. text)
  end
  s = {ttl, 0, run = form == 'N '}
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
-- DEL; the same reply, {1} (or {2}). Without the batch's tables (limits, sets,
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
  local moved = false -- a quota's delta applied to nothing: reply {2} (the batch layout's 2)
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
      elseif units ~= 0 then -- the period moved on: applied to nothing
        moved = true
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
  if moved then
    return {2}
  end
  return {1}
end

-- writeView writes view c of bucket key after its settlement, as both
-- layouts end: a view its deltas left unchanged is not written, one left
-- full or empty is deleted when it was stored, any other gets its value
-- with the TTL its settlement gave (PX) or its own (KEEPTTL).
local function writeView(key, c)
  local kind = c[KIND]
  if not c[DIRTY] then
    return
  end
  if kind == nil then
    if c[FOUND] then
      redis.call('DEL', key)
    end
    return
  end
  local v
  if kind == 't' then -- encode, as reconcileLone does; its TTL's text by pxText
    local level, updated = c[A], c[B]
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
    if c[PX] then
      redis.call('SET', key, v, 'PX', pxText(c[PX]))
    else
      redis.call('SET', key, v, 'KEEPTTL')
    end
    return
  end
  if kind == 'q' then
    v = encodeQuota(c[A], c[B])
  else
    v = encodeWindow(c[A], c[B], c[C])
  end
  if c[PX] then
    redis.call('SET', key, v, 'PX', c[PX])
  else
    redis.call('SET', key, v, 'KEEPTTL')
  end
end

-- The per-delta sums of reconcileRun, kept from call to call (each call
-- sets the first d of each before it adds to them).
local runRefund, runSpend = {}, {}

-- reconcileRun is the script for a run of m >= 2 reconciliations of one
-- shape (mode 'h': ids of bucket.NewRequestID's form, all of one epoch's
-- marker set; each entry's deltas on the same distinct keys under the same
-- limits, each a token bucket's or a quota's), sent in the run layout:
-- KEYS[1] the marker set, KEYS[1 + i] the bucket of delta i; ARGV[1] the
-- shape (rcShapeOf, opening with "N "), ARGV[2] every entry's units,
-- packed (unitsOf: n numbers an entry, entry after entry; m is their count
-- over n), ARGV[2 + e] the request id of entry e and, in tests only,
-- ARGV[m + 3] now (µs; absent: Redis TIME). It does what the batch layout
-- does for such a call, step for step: TIME, one MGET of the buckets, one
-- SMISMEMBER of the ids; each entry applies when its id is neither in the
-- set nor an earlier entry's, its units summed per delta, negative ones
-- (refund) apart from the others (spend), in entry order (the same
-- additions, so the same doubles); when any applies, one SADD of every id
-- and the set's PEXPIRE, then each bucket settled once (settle: refunds
-- first, then charges) and written by one SET or DEL (writeView). The same
-- reply: per entry 1, 0 for an id applied before, 2 for one that applied
-- while a quota's period had moved on (see settle). Without the batch's
-- tables (limits, sets, shapes, order, groups) and with m + 2 ARGV instead
-- of 4n + m + 12. bucket's TestReconcileRunMatchesBatch compares it with
-- the batch layout.
local function reconcileRun(s, KEYS, ARGV)
  local n = s[2]
  local U = unitsOf(ARGV[2] or '')
  local m = #U / n
  if m < 2 or m % 1 ~= 0 or #KEYS ~= n + 1 or #ARGV < m + 2 then
    error('llmguard: reconciliation run of ' .. #KEYS .. ' KEYS, ' .. #ARGV .. ' ARGV, ' .. #U .. ' units for ' .. n .. ' deltas')
  end
  local now = clock(ARGV[m + 3] or '')
  local stored = redis.call('MGET', unpack(KEYS, 2, n + 1))
  local got = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 3, m + 2))
  local refund, spend = runRefund, runSpend
  for i = 1, n do
    refund[i], spend[i] = 0, 0
  end
  local seen, reply, fresh, u = {}, {}, 0, 0
  for e = 1, m do
    local id = ARGV[2 + e]
    if got[e] == 1 or seen[id] then
      reply[e] = 0
    else
      seen[id], fresh = true, fresh + 1
      reply[e] = 1
      for i = 1, n do
        local units = U[u + i]
        if units < 0 then
          refund[i] = refund[i] + units
        else
          spend[i] = spend[i] + units
        end
      end
    end
    u = u + n
  end
  if fresh == 0 then
    return reply
  end
  redis.call('SADD', KEYS[1], unpack(ARGV, 3, m + 2))
  redis.call('PEXPIRE', KEYS[1], s[1])
  local moved = false
  local views = {}
  for i = 1, n do
    local kind, x, y, z = parse(stored[i])
    local c = {kind, x, y, kind ~= nil, false, false, z}
    local limit = s[2 + i]
    if limit[6] == 't' and kind == 't' then
      settleTokens(c, limit, refund[i], spend[i], now)
    elseif settle(c, limit, refund[i], spend[i], now) then
      moved = true
    end
    views[i] = c
  end
  if moved then -- every entry that applied applied a delta of the moved quota's group
    for e = 1, m do
      if reply[e] == 1 then
        reply[e] = 2
      end
    end
  end
  for i = 1, n do
    writeView(KEYS[1 + i], views[i])
  end
  return reply
end

-- @entry: the script's work; a Redis Functions library runs it as a function.
floor = math.floor
local lone = rcShapeOf(ARGV[1])
if lone then
  if lone.run then
    return reconcileRun(lone, KEYS, ARGV)
  end
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
  sets[h] = {KEYS[digits[ARGV[a]] or ARGV[a] + 0], a + 2, n, a + 2, false, 0}
  a = a + 2 + n
end

-- Every shape: its mode, its marker set (mode 'h': its record; mode 'w':
-- the taken set's key; else false), its delta count, its deltas' bucket
-- keys and limits, its groups, (mode 'w') the voided set's key, and the
-- runDeltas that runs its runs (nil: the loop below does). Every bucket
-- key once, in order of first use (a shape's keys are
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
  local shape = {mode, set, count, keys, lims, {}, voids}
  -- runDeltas runs the shape's runs when its mode is 'h' or 'n', its keys
  -- distinct and no limit an in-flight one (and, mode 'h', its set has
  -- more than one entry: checked per run).
  if (mode == 'h' or mode == 'n') and count <= 4 then
    local fast = runDeltas[count]
    for i = 1, count do
      if lims[i][6] == 'c' then
        fast = nil
      end
      for j = 1, i - 1 do
        if keys[i] == keys[j] then
          fast = nil
        end
      end
    end
    shape[8] = fast
  end
  shapes[s] = shape
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
local runsFrom = a -- the first run's ARGV, for the replies of 2 below
local last = #ARGV - 1 -- the runs' last ARGV: then the units, packed
local U, u = unitsOf(ARGV[last + 1]), 0 -- every entry's units, in order; u: those read so far
while a <= last do
  local shape = shapes[digits[ARGV[a]] or ARGV[a] + 0]
  local mode, set, count = shape[1], shape[2], shape[3]
  local run = digits[ARGV[a + 1]] or ARGV[a + 1] + 0
  a = a + 2
  local fast = shape[8]
  if fast and (mode == 'n' or set[IDS] > 1) then
    u = fast(shape, run, u, #reply, ARGV, U, set, reply, view, groups)
    run = 0
  end
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
          s[id], set[FRESH] = true, set[FRESH] + 1
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
        local units = U[u + i]
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
    u = u + count
  end
end

-- The markers of the ids applied now, one SADD per set where any entry
-- applied, which then lives dedupFor ms more (every marker at least
-- dedupFor after its write). It adds every id of the set's entries, as
-- they are in ARGV: an entry that did not apply has an id the set held
-- before (SMISMEMBER said so) or an earlier entry's (which applied), so
-- the set ends with the same members as if it added the applied ids only.
for _, set in ipairs(sets) do
  if set[FRESH] > 0 then
    local from = set[FROM]
    redis.call('SADD', set[SETKEY], unpack(ARGV, from, from + set[IDS] - 1))
    redis.call('PEXPIRE', set[SETKEY], dedupFor)
  end
end

-- Every group's sums, in order of the group's first delta: refunds, then
-- charges (see settle); moved is set when a quota's group applied to
-- nothing (settle). A token bucket's group on a view holding a token
-- bucket's state (the common case) runs settleTokens, settle's steps
-- inlined.
local moved = false
for _, g in ipairs(groups) do
  local c, limit = g[1], g[2]
  if limit[6] == 't' and c[KIND] == 't' then
    settleTokens(c, limit, g[3], g[4], now)
  elseif settle(c, limit, g[3], g[4], now) then
    g[5] = true -- moved: its entries reply 2 (below)
    moved = true
  end
end

-- The entries that applied a delta of a group whose period moved on reply
-- 2 instead of 1: the runs read again (only then: a quota's period moves
-- on rarely), each entry's group that of its shape's delta (gs).
if moved then
  local at, o = runsFrom, 0
  while at <= last do
    local shape = shapes[digits[ARGV[at]] or ARGV[at] + 0]
    local run = digits[ARGV[at + 1]] or ARGV[at + 1] + 0
    at = at + 2
    local mode, gs, hit = shape[1], shape[6], false
    for i = 1, shape[3] do
      if gs[i] and gs[i][5] then
        hit = true
      end
    end
    local width = 0 -- its ARGV an entry (its units are packed)
    if markerOf[mode] then
      width = width + 1
    end
    if mode == 'w' then
      width = width + 1
    end
    for _ = 1, run do
      o = o + 1
      if hit and reply[o] == 1 then
        reply[o] = 2
      end
    end
    at = at + run * width
  end
end

for _, key in ipairs(order) do
  writeView(key, view[key])
end
return reply
