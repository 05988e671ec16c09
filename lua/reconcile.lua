-- reconcile.lua: signed deltas on a request's buckets, applied once per
-- request id.
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
-- ARGV[4i-1], ARGV[4i], ARGV[4i+1], ARGV[4i+2]
--           capacity (units), rate (units per per), per (µs) and units of
--           delta i: positive charges (the level may go below zero, debt),
--           negative refunds (never above capacity). The caller has
--           validated the limits (bucket.Limit.Validate).
--
-- Reply, an integer: 1 when the deltas were applied, 0 when the marker
-- already existed (a retry: nothing changed).
--
-- State and expiry as in take.lua. The core functions mirror
-- bucket/tokenbucket.go line by line, under the same names; take.lua holds
-- identical copies (a Go test compares them).

-- maxWait caps every wait, in µs: 2^53 is exact as a double.
local maxWait = 2 ^ 53

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

-- load returns a bucket's stored state, or a full one at now when missing.
local function load(key, capacity, now)
  local v = redis.call('GET', key)
  if not v then
    return capacity, now, false
  end
  local sp = string.find(v, ' ', 1, true)
  return tonumber(string.sub(v, 1, sp - 1)), tonumber(string.sub(v, sp + 1)), true
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
  local a = 4 * i - 1
  local capacity, rate, per, units = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local key = KEYS[m + i]
  local level, updated, found = load(key, capacity, now)
  level, updated = apply(level, updated, capacity, rate, per, now, units)
  put(key, found, level, updated, capacity, wait(level, capacity, rate, per), now)
end
return 1
