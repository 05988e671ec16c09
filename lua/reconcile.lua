-- reconcile.lua: signed deltas on a request's buckets (token buckets and
-- quotas), applied once per request id; or, in void mode, the refund of a
-- request's take, applied only when that take was, once.
--
-- KEYS[1]   when ARGV[2] > 0: the request's marker key, in the same slot as
--           the buckets. Reconcile mode: "llmguard:{<their hash tag>}::rc:
--           <request id>", whose existence means this request id was
--           applied. Void mode: the take marker of take.lua,
--           "llmguard:{<their hash tag>}::tk:<request id>".
-- KEYS[m+i] bucket of delta i (m = 1 with a marker, else 0); a key may
--           repeat, its deltas apply in order; in Redis Cluster all KEYS
--           share a slot.
-- ARGV[1]   now, µs since the Unix epoch; '' (always, outside tests) reads
--           Redis TIME.
-- ARGV[2]   how long the marker lives, ms; '0': no marker (an empty request
--           id, or an internal refund), the deltas apply on every call.
-- ARGV[3]   '1': void mode (ARGV[2] > 0; the deltas are the take's costs,
--           negated); '0': reconcile mode.
-- ARGV[6i-2] .. ARGV[6i+3]
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
-- already existed (a retry: nothing changed). In void mode: 1 when the take
-- marker said 't' (the take was applied: refunded now), 0 otherwise (no
-- take yet: the marker is left 'v', a tombstone that makes a late take
-- apply nothing; or 'v' already: a second void). Either way the marker is
-- then 'v', expiring ARGV[2] ms later.
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

local now = clock(ARGV[1])

local m = 0
local dedupFor = tonumber(ARGV[2])
if dedupFor > 0 and ARGV[3] == '1' then
  local mark = redis.call('GET', KEYS[1])
  local nextMark, refund = voidMark(mark)
  if mark ~= nextMark then
    redis.call('SET', KEYS[1], nextMark, 'PX', ARGV[2])
  end
  if not refund then
    return 0
  end
  m = 1
elseif dedupFor > 0 then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then
    return 0
  end
  m = 1
end

for i = 1, #KEYS - m do
  local a = 6 * i - 2
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
