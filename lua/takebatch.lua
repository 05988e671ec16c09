-- takebatch.lua: the takes of several requests in one script, each
-- committing, each run as take.lua would run it alone (all-or-nothing; a
-- denial spends nothing), in order, at one instant.
--
-- KEYS      request after request: its take marker key (when its marker
--           TTL is not '0'), then its n bucket keys, as in take.lua. A key
--           may repeat across requests (a tenant's or a global bucket): its
--           takes apply in order. In Redis Cluster all KEYS share a slot.
-- ARGV[1]   now, as in take.lua.
-- ARGV[2]   'b'.
-- ARGV[3]   R, the number of requests; then, request after request, its
--           marker TTL (take.lua's ARGV[3]), its bucket count n, and its 6n
--           bucket ARGV (as in take.lua).
--
-- Reply: one take.lua reply per request, in order. A failure (an error in
-- the script) fails every request of the batch and writes nothing: every
-- key is read before the first take and written after the last.
--
-- Redis commands: TIME (unless ARGV[1] pins now), one MGET of every
-- distinct key, then one SET or DEL per key the takes changed (the markers
-- of committed takes among them): a bucket that many requests share is read
-- and written once per batch.
--
-- Package lua builds the script: take.lua up to its "-- @body" line
-- (core.lua inserted) at the "-- @take" line below, then the overrides
-- below, then take.lua's body as the function takeOne(KEYS, ARGV) at the
-- "-- @takeOne" line.

-- @take: take.lua up to its body is inserted here by package lua.

-- Every take of a batch commits.
commit = true

-- Reads come from, and writes go to, state (key -> its value as the takes
-- so far left it: a string, false when missing, or {encodeIt, a, b} for a
-- value written in the batch and not encoded yet); pending holds each
-- written key's last write (a TTL in ms, true to keep the TTL, false to
-- delete, 'persist' for a value with no TTL), flushed after every take.
local state, pending, written = {}, {}, {}

-- encoderKind is the kind parse returns for the values of each encoder: a value
-- written in the batch is read back as parse(encodeIt(a, b)) would read it
-- (encode keeps 17 digits, so the level comes back bit for bit) without
-- the text. An encoder not listed is encoded and parsed.
local encoderKind = {[encode] = 't', [encodeQuota] = 'q', [encodeWindow] = 'w'}

-- parseText is core.lua's parse; parse, here, also reads the values the
-- batch wrote.
local parseText = parse
local function parse(v)
  if type(v) ~= 'table' then
    return parseText(v)
  end
  local kind = encoderKind[v[1]]
  if kind then
    return kind, v[2], v[3], v[4]
  end
  return parseText(v[1](v[2], v[3], v[4]))
end

-- remember records a write of value v (false: a delete) to key with how
-- (see pending). A TTL kept over an earlier write of the batch
-- is that write's TTL (or none after a delete), as Redis would have it.
local function remember(key, how, v)
  local before = pending[key]
  if before == nil then
    written[#written + 1] = key
  elseif how == true and before ~= true then
    how = before or 'persist'
  end
  state[key], pending[key] = v, how
end

-- read returns the stored values of keys from state.
local function read(keys)
  local out = {}
  for i = 1, #keys do
    out[i] = state[keys[i]]
  end
  return out
end

-- mark records a committed take's marker, 't' for ttl ms.
local function mark(key, ttl)
  remember(key, ttl + 0, 't')
end

-- write, in a batch, records what put or putQuota returned for key (see
-- take.lua's write) in state, the value left unencoded until the flush.
local function write(key, how, encodeIt, a, b, c)
  if how ~= nil then
    remember(key, how, how and {encodeIt, a, b, c})
  end
end

-- hold, in a batch, adds an in-flight holder at once (core.lua's hold) and
-- records the key as holding no string: a later take of the batch counts
-- the holders (liveSlots) rather than read a value the first one replaced.
local holdNow = hold
local function hold(key, holder, expiry, now)
  state[key] = false
  return holdNow(key, holder, expiry, now)
end

-- @takeOne: take.lua's body, as takeOne(KEYS, ARGV), is inserted here by package lua.

-- The batch: read every distinct key once, run each request's take in
-- order on state, then write each key its takes changed once.
local distinct, seenKey = {}, {}
for i = 1, #KEYS do
  local k = KEYS[i]
  if not seenKey[k] then
    seenKey[k] = true
    distinct[#distinct + 1] = k
  end
end
local values = redis.call('MGET', unpack(distinct))
for i = 1, #distinct do
  state[distinct[i]] = values[i]
end
local replies = {}
local k, a = 0, 4
for r = 1, ARGV[3] + 0 do
  local ttl, n = ARGV[a], ARGV[a + 1] + 0
  local keys, args = {}, {ARGV[1], '1', ttl}
  local m = 0
  if ttl ~= '0' then
    m = 1
  end
  for i = 1, n + m do
    keys[i] = KEYS[k + i]
  end
  for i = 1, 6 * n do
    args[3 + i] = ARGV[a + 1 + i]
  end
  k, a = k + n + m, a + 2 + 6 * n
  replies[r] = takeOne(keys, args)
end
for i = 1, #written do
  local key = written[i]
  local how, v = pending[key], state[key]
  if type(v) == 'table' then
    v = v[1](v[2], v[3], v[4])
  end
  if not how then
    redis.call('DEL', key)
  elseif how == true then
    redis.call('SET', key, v, 'KEEPTTL')
  elseif how == 'persist' then
    redis.call('SET', key, v)
  else
    redis.call('SET', key, v, 'PX', how)
  end
end
return replies
