-- takebatch.lua: the takes of several requests in one script, each
-- committing, each run as take.lua would run it alone (all-or-nothing; a
-- denial spends nothing), in order, at one instant.
--
-- KEYS      the batch's distinct bucket keys, in order of first use (D of
--           them), then the take marker key of each request whose marker
--           TTL is not '0' and whose id is not bucket.NewRequestID's, in
--           request order; then, per epoch of the batch's requests whose
--           ids are bucket.NewRequestID's (E of them, in order of first
--           use), its taken set "llmguard:{<hash tag>}::tkt:<epoch>" and its
--           voided set "…::tkv:<epoch>". A bucket key that many
--           requests name (a tenant's or a global bucket) is sent once: its
--           takes apply in order. In Redis Cluster all KEYS share a slot.
-- The texts go one an ARGV; every number (a count, an index, a cost) goes
-- packed, in the order listed, in the last ARGV, N below (core.lua's
-- unitsOf: 8 bytes a number, a little-endian double; an ARGV a number
-- cost Redis some 1.2k instructions more a number: its parse, a Lua string
-- of it, both freed after the call, and "+ 0"'s strtod).
-- ARGV[1]   now, as in take.lua.
-- ARGV[2]   'c' (this layout).
-- N         R, the number of requests; D, the number of distinct bucket
--           keys; L, the number of distinct limits; S, the number of
--           distinct shapes; E, the number of epochs (pairs of sets at the
--           end of KEYS).
-- then 1 ARGV per limit: its capacity, rate, per, windowStart and
--           windowEnd, take.lua's five ARGV, as one text (core.lua's
--           limitOf: decimal integers separated by spaces; read once per
--           text in a library, whose limitOf keeps what it read from call
--           to call, instead of five conversions per batch);
-- then per shape, what the takes of one kind share: an ARGV, the marker
--           TTL (take.lua's ARGV[3]); and in N, the epoch of its sets (1 to
--           E; 0: none, the take has a marker key or no marker), the bucket
--           count n, then per bucket, narrowest first, the index of its key
--           among the first D KEYS (1 to D) and the index of its limit (1
--           to L);
-- then the requests in runs of one shape (consecutive requests of one
--           shape are one run): in N, the index of the run's shape (1 to S)
--           and the run's length; then, request after request, an ARGV, its
--           request id, when the shape has sets, and in N the cost of each
--           of its shape's n buckets (units, >= 0), in the shape's order;
-- and last, N: those numbers, packed.
--
-- A take of a shape with sets reads no marker key: it was voided when its
-- id is a member of its epoch's voided set (reconcile.lua's void adds it
-- there, and still leaves 'v' in the marker key, which take.lua and older
-- batches read), asked by one SCARD per voided set and batch and, only
-- when the set exists, one SMEMBERS (it holds no more ids than the batch
-- has takes: a void is rare) or else one SISMEMBER per take; a committed
-- take adds its id to the taken set instead of setting its marker key to
-- 't';
-- reconcile.lua's void of such an id looks in both.
--
-- Reply: one string where Redis has the struct library (Redis's Lua;
-- not miniredis's): the numbers below packed as unitsOf reads a batch's
-- costs, each 8 bytes, a little-endian double (struct.pack, at most
-- replyPackMax numbers a call, the parts joined), which package bucket
-- turns into an integer as Redis turns a reply number into one (a cast,
-- toward zero: each number here is whole and within the int64 range),
-- but for a run's levels (below), read as they are. Redis converts an
-- array's each number for the reply, some 300 instructions more a number
-- than the string's 8 bytes. Else, the array:
-- one flat array of integers, each request's take.lua reply in
-- order, an allowed one without the three numbers after its 1 (take.lua's
-- allowed reply always opens 1, -1, 0, 0): -1 for a voided request; 0 and
-- the rest of a denied reply (the denying bucket, too large, retry, then
-- per bucket its remaining and reset, then per bucket its window start
-- when a bucket is a window counter); 1 and the rest of an allowed reply
-- after those four (per bucket its remaining and reset, then the window
-- starts, as denied). Packed, a run that runTokens runs (a shape of token
-- buckets; see there) opens with 3 and its n buckets' levels at now, and
-- each allowed take of it is 2 alone: package bucket takes the take's
-- costs from those levels, in order, and works out its remaining units
-- and resets as takeTokens would. Package bucket splits the reply by each
-- request's buckets.
-- One flat array is what Redis converts cheapest: each nested table cost
-- it some 4k instructions (its checks for an error, status, map or set
-- reply, measured by callgrind), more than the take's arithmetic per
-- bucket. A failure (an error in
-- the script) fails every request of the batch and writes nothing: every
-- key is read before the first take and written after the last.
--
-- Redis commands: TIME (unless ARGV[1] pins now), one MGET of every
-- bucket key and marker key (a marker that repeats, a request id taken
-- twice, is read twice), one SCARD per voided set and, when it exists,
-- one SMEMBERS of it or one SISMEMBER per take of its epoch (see above);
-- then per taken set one SADD of the
-- committed takes' ids and one PEXPIRE, then one SET (a TTL's as PSETEX,
-- the same write with one argument fewer) or DEL per key the
-- takes changed (the marker keys of other committed takes among them): a
-- bucket that many requests share is read and written once per batch.
--
-- Package lua builds the script: take.lua up to its "-- @entry" line
-- (core.lua inserted) at the "-- @take" line below, then the overrides
-- below, then take.lua's body (after its "-- @body" line) as the function
-- takeOne(KEYS, ARGV) at the "-- @takeOne" line, then the batch's entry
-- (after the "-- @batch" line). In the Redis Functions library (lua.go's
-- Library) the entry is the body of the function the library registers.

-- @take: take.lua up to its entry is inserted here by package lua.

-- Reads come from, and writes go to, state (key -> its value as the takes
-- so far left it: a string, false when missing, or the key's cell
-- {encodeIt, a, b, c} for a value written in the batch and not encoded
-- yet); pending holds each written key's last write (a TTL in ms, true to
-- keep the TTL, false to delete, 'persist' for a value with no TTL),
-- flushed after every take. A key has one cell, refilled by each write
-- (cells, by key); made holds the cells, so that parse tells them from
-- stored strings without a call to type. In a library these tables are
-- kept from call to call, as out is (a new table, and each key's first
-- insert growing it, cost Redis 7.0 some 1k instructions): each call
-- empties state, pending and written of what the last one left (a call
-- that failed included) before it reads a key, and keeps cells and made
-- (a cell is read only after a write of the same call refilled it), at
-- most cellMax of them, then emptied.
local state, pending, written, cells, made = {}, {}, {}, {}, {}
local cellCount, cellMax = 0, 1024

-- encoderKind is the kind parse returns for the values of each encoder: a value
-- written in the batch is read back as parse(encodeIt(a, b)) would read it
-- (encode keeps 17 digits, so the level comes back bit for bit) without
-- the text. An encoder not listed is encoded and parsed.
local encoderKind = {[encode] = 't', [encodeQuota] = 'q', [encodeWindow] = 'w'}

-- parseText is core.lua's parse; parse, here, also reads the values the
-- batch wrote.
local parseText = parse
local function parse(v)
  if not (v and made[v]) then
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

-- read returns the stored values of keys from state, in a table that
-- every take reuses (takeOne reads it only while it runs, and only at the
-- indexes of its own keys).
local readOut = {}
local function read(keys)
  for i = 1, #keys do
    readOut[i] = state[keys[i]]
  end
  return readOut
end

-- The batch's taken sets (requests whose ids are bucket.NewRequestID's):
-- takenIds[set] the ids of the committed takes to add to a taken set
-- (takenSets in order, takenTTL its TTL), by one SADD and one PEXPIRE per
-- set in the flush; takenOf a shape's taken set; voidedOf the ids of its
-- voided set (a table, when the batch read them) or voidedSetOf its key
-- (when it holds more ids than the batch has takes), neither when it does
-- not exist; markerOf the prefix of its ids' marker key names.
-- Kept from call to call in a library as state is: each call empties
-- takenIds, takenSets and takenTTL of the last one's sets, and sets
-- takenOf, voidedOf and voidedSetOf for each of its shapes (the shapes'
-- tables kept too, see the entry); markerOf, filled only by takes that run
-- takeOne, is emptied by the next call (dirty).
local takenIds, takenSets, takenTTL, takenOf, voidedOf, voidedSetOf, markerOf = {}, {}, {}, {}, {}, {}, {}

-- dirty is true when a call may have left keys in state that are not its
-- KEYS (a take run by takeOne, which names marker keys from ids) or ids in
-- markerOf: the next call empties both whole. lastKeys is the last call's
-- KEYS, the keys it left in state otherwise.
local dirty, lastKeys = false, nil

-- The entry's tables of a call, kept from call to call in a library: each
-- call sets what it reads of them. voidedIds and voidedKey, by epoch (see
-- the entry); limits, by index; shapes, by index, each shape's table
-- refilled; fast and unrolled, by shape.
local voidedIds, voidedKey, limits, shapes, fast, unrolled = {}, {}, {}, {}, {}, {}

-- markIn records a committed take's id in a taken set, for the flush.
local function markIn(set, id, ttl)
  local list = takenIds[set]
  if not list then
    list = {}
    takenIds[set], takenTTL[set] = list, ttl
    takenSets[#takenSets + 1] = set
  end
  list[#list + 1] = id
end

-- mark records a committed take's marker, 't' for ttl ms (the TTL's text
-- as sent: the flush passes it to SET PX unconverted); or, when the entry
-- set markSet and markId for the take takeOne runs (its id is
-- bucket.NewRequestID's), the id in its taken set (markIn).
local markSet, markId
local function mark(key, ttl)
  if markSet then
    return markIn(markSet, markId, ttl)
  end
  remember(key, ttl, 't')
end

-- write, in a batch, records what put or putQuota returned for key (see
-- take.lua's write) in state, the value left unencoded until the flush.
local function write(key, how, encodeIt, a, b, c)
  if how == nil then
    return
  elseif not how then
    return remember(key, how, false)
  end
  local cell = cells[key]
  if cell then
    cell[1], cell[2], cell[3], cell[4] = encodeIt, a, b, c
  else
    cell = {encodeIt, a, b, c}
    cells[key], made[cell], cellCount = cell, true, cellCount + 1
  end
  remember(key, how, cell)
end

-- hold, in a batch, adds an in-flight holder at once (core.lua's hold) and
-- records the key as holding no string: a later take of the batch counts
-- the holders (liveSlots) rather than read a value the first one replaced.
local holdNow = hold
local function hold(key, holder, expiry, now)
  state[key] = false
  return holdNow(key, holder, expiry, now)
end

-- out holds the batch's reply (see the header), made once in a library
-- and reused by each call, which clears what an earlier call left past its
-- own reply: a batch's reply then grows no table. Its entries are always
-- 1 to its length with no nil between (a call writes them in order, from
-- 1, each take's before the next's, and stops at its first error; the
-- clearing goes from its own reply's end to the first nil), so the
-- clearing reaches every entry an earlier call left, even one it failed.
local out = {}

-- replyFormats holds struct.pack's format of a reply of n numbers, by n,
-- made at the first reply of that length and kept: n at most replyPackMax
-- (the formats then hold at most some 130 KB; a reply of more numbers is
-- packed in parts of replyPackMax, joined: a C stack holds no more than
-- some 8,000 values).
local replyFormats, replyPackMax = {}, 512

-- appendReply appends take.lua's reply t (a table of numbers ending at its
-- first nil, as Redis reads it) to out after its first o entries, in the
-- batch's form, and returns the new length.
local function appendReply(t, o)
  local i = 1
  if t[1] == 1 then
    out[o + 1] = 1
    o, i = o - 3, 5
  end
  while t[i] ~= nil do
    out[o + i] = t[i]
    i = i + 1
  end
  return o + i - 1
end

-- @unroll
-- runTokens@W runs a run of takes of one shape of @W token buckets, each
-- take as the fast path in the batch's loop below (takeTokens) runs it,
-- with each bucket's key, limit and state in locals instead of tables: the
-- loop's per-bucket reads and writes of state, cells, levels, updateds,
-- founds and spends (some 30 table accesses a bucket a take) are gone.
-- Package lua makes runTokens1 to runTokens4 from this text (lua.unroll:
-- each bucket's block once per bucket, its index in the names). The
-- shape's keys are distinct and no take of it has a marker key (its shape
-- has a taken set, or no marker), so nothing else runs on its buckets
-- between its takes:
-- each bucket is read once, before the run, as takeTokens would read it
-- (a cell of the batch, or parse and load), refilled and clamped to now
-- once (refill is idempotent at one instant: takeTokens's refill of a
-- later take changes nothing), and written once, after it, as
-- takeTokens's last write of it left it. Between takes a bucket's state is
-- what takeTokens would read back: after a commit that wrote it, the level
-- and updated it wrote; after a delete, a missing key's (capacity, now,
-- not found); after a take that wrote nothing, the state refilled at now.
-- A commit that writes a bucket records only that it does (its how, true):
-- put's TTL, from the reset of the level written and updated, is worked
-- out after the run for the last write alone, the only one the flush
-- sends (a later commit either writes again or deletes; a delete's
-- sends nothing, and no commit after a write finds the bucket missing).
-- Runs only where the reply is packed (see the header): the run's reply
-- is 3 and each bucket's level after the refill, exactly (8 bytes a
-- double), then per take -1 (voided), the denied reply (0, …: as
-- takeTokens's) or 2 for an allowed take, whose remaining units and reset
-- package bucket works out from those levels and the take's costs
-- (takeTokens's own arithmetic, in Go: level minus cost, floorUnits and
-- wait), instead of the script (some 40% of an allowed take's Lua: the
-- reset's loop, the floor, two numbers a bucket in the reply).
-- It takes the run's length, p (the next ARGV to read), o (out's length),
-- the run's taken set and voided ids or set, U (every take's costs,
-- unitsOf) and u (the costs of U read so far: the run's first take's are
-- from U[u + 1]), and returns p, o and u after the run.
local function runTokens@W(shape, run, p, o, ARGV, taken, voids, voidSet, ttl, U, u)
  out[o + 1] = 3
  -- @each
  local key@i, limit@i = shape[1 + 2 * @i], shape[2 + 2 * @i]
  local capacity@i, rate@i, per@i = limit@i[1], limit@i[2], limit@i[3]
  local level@i, updated@i, found@i
  local v@i = state[key@i]
  if not v@i then -- missing, or deleted by the batch: load's full bucket
    level@i, updated@i, found@i = capacity@i, now, false
  elseif encodedLevel[v@i] then -- a text this library wrote: parse's lookup, load's 't'
    level@i, updated@i, found@i = encodedLevel[v@i], encodedUpdated[v@i], true
  elseif made[v@i] and v@i[1] == encode then
    level@i, updated@i, found@i = v@i[2], v@i[3], true
  else
    local kind, x, y = parse(v@i)
    level@i, updated@i, found@i = load(kind, x, y, capacity@i, now)
  end
  if now > updated@i then -- refill
    level@i = level@i + (now - updated@i) * rate@i / per@i
    updated@i = now
  end
  if level@i > capacity@i then
    level@i = capacity@i
  end
  out[o + 1 + @i] = level@i
  local how@i -- the last write's (see pending): nil before the first; true for a write whose TTL is not worked out yet
  -- @end
  o = o + 1 + @W
  for _ = 1, run do
    local id, c = nil, u -- the id of a take with a taken set; its costs from U[c + 1]
    if taken then
      id, p = ARGV[p], p + 1
    end
    u = u + @W
    repeat -- one take; break ends it
      if voids then
        if voids[id] then
          o = o + 1
          out[o] = -1
          break
        end
      elseif voidSet then
        if redis.call('SISMEMBER', voidSet, id) == 1 then
          o = o + 1
          out[o] = -1
          break
        end
      end
      local firstLarge, slowest, retry = -1, -1, 0
      -- @each
      local cost@i = U[c + @i]
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
      -- @end
      if firstLarge >= 0 or slowest >= 0 then
        if firstLarge >= 0 then
          out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, firstLarge, 1, 0
        else
          out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, slowest, 0, retry
        end
        -- @each
        out[o + 3 + 2 * @i], out[o + 4 + 2 * @i] = floorUnits(level@i), wait(level@i, capacity@i, rate@i, per@i)
        -- @end
        o = o + 4 + 2 * @W
        break
      end
      if taken then
        local list = takenIds[taken] -- markIn, inlined once the set has a list
        if list then
          list[#list + 1] = id
        else
          markIn(taken, id, ttl)
        end
      end
      -- @each
      do -- put(found, level, updated, capacity, reset, now), its TTL left for after the run
        local level = level@i - cost@i
        if level >= capacity@i then
          if found@i then
            how@i = false
            level@i, updated@i, found@i = capacity@i, now, false -- a missing key's, as load gives it
          else
            level@i = level
          end
        else
          how@i = true
          level@i, found@i = level, true
        end
      end
      -- @end
      o = o + 1
      out[o] = 2
    until true
  end
  -- Each bucket's last write, as takeTokens's write and remember leave it.
  -- @each
  if how@i ~= nil then
    local v = false
    if how@i then
      -- put's TTL of the last write: its level and updated are level@i
      -- and updated@i (see above); reset is wait(level, capacity, rate,
      -- per), inlined as in takeTokens.
      local reset = 0
      if not (level@i >= capacity@i) then
        local q = (capacity@i - level@i) * per@i / rate@i -- > 0, or NaN
        if q >= maxWait then -- floor(q) >= maxWait exactly when q is
          reset = maxWait
        else
          reset = q - q % 1 -- floor(q)
          local j = 0
          while j < 2 and level@i + reset * rate@i / per@i < capacity@i do
            reset = reset + 1
            j = j + 1
          end
        end
      end
      local x = (updated@i + reset - now) / 1000 -- finite, or NaN
      how@i = x - x % 1 + 1000 -- floor(x) + 1000
      v = cells[key@i]
      if v then
        v[1], v[2], v[3], v[4] = encode, level@i, updated@i, nil
      else
        v = {encode, level@i, updated@i}
        cells[key@i], made[v], cellCount = v, true, cellCount + 1
      end
    end
    if pending[key@i] == nil then
      written[#written + 1] = key@i
    end
    state[key@i], pending[key@i] = v, how@i
  end
  -- @end
  return p, o, u
end
-- @unroll end

-- @takeOne: take.lua's body, as takeOne(KEYS, ARGV), is inserted here by package lua.

-- The phase-1 state of each bucket of the token-bucket take running, by
-- index (reused from take to take): level, updated, found and cost.
local levels, updateds, founds, spends = {}, {}, {}, {}

-- takeTokens, inlined in the batch's loop below (a call of it cost some
-- 1.5k instructions per take), is takeOne for a take whose buckets are all
-- token buckets that runTokens does not run (a shape of more than 4
-- buckets or with a key twice, or a take with a marker key; runTokens runs
-- each take as takeTokens would; its shape's fast flag): take.lua's body for that kind step for step,
-- the same core steps in the same order (parse, load, refill, check, wait,
-- put, floorUnits; mark and write as the batch records them), without its
-- per-bucket dispatch, its seen tables or its KEYS and ARGV; a bucket an
-- earlier take of the batch wrote is read from its cell as parse and load
-- would read it. The steps run on every bucket of every take (refill,
-- check, the reset's wait, put, floorUnits, write and its remember) are
-- inlined, each the core function's own expressions in its own order
-- (so the same doubles), under the same names in comments: a Lua call
-- costs Redis 7.0's interpreter 1k-1.8k instructions (measured by
-- callgrind, removing each call from a batch of 32), some 18k of a
-- three-bucket take. The rare steps (wait for a denial's retry, a level
-- beyond the int64 range) call the core functions. bucket's
-- TestTakeBatchMatchesSequence compares them with take.lua's body, reply
-- by reply and key by key, TTLs included.
-- It reads the take's shape, key (its marker key, nil without: no marker,
-- or sets), ttl (the marker's TTL), its costs from U[c + 1] on and id
-- (its request id when the shape has sets: voided when a member of
-- voided, the voided set if it exists; the commit records the id in the
-- taken set instead of in a marker key), and appends its reply to out (as appendReply
-- would append take.lua's). The floors of its commit are x - x % 1 (see
-- core.lua's floor) rather than calls of floor.

-- @batch: the batch's entry; a Redis Functions library runs it as a function.
floor = math.floor
-- Every take of the batch commits, at one instant; state starts empty (a
-- library keeps the tables above from one call to the next).
now, commit = clock(ARGV[1]), true
-- Empty what the last call left in the tables kept from call to call (see
-- state and takenIds), even a call that failed midway.
for i = #written, 1, -1 do
  local key = written[i]
  state[key], pending[key], written[i] = nil, nil, nil
end
if lastKeys then
  for i = 1, #lastKeys do
    state[lastKeys[i]] = nil
  end
end
if dirty then
  for key in pairs(state) do
    state[key] = nil
  end
  for set in pairs(markerOf) do
    markerOf[set] = nil
  end
  dirty = false
end
lastKeys = KEYS
for i = #takenSets, 1, -1 do
  local set = takenSets[i]
  takenIds[set], takenTTL[set], takenSets[i] = nil, nil, nil
end
markSet = nil
if cellCount > cellMax then
  cells, made, cellCount = {}, {}, 0
end

-- The batch: read every key once, run each request's take in order on
-- state, then write each key its takes changed once. Each take gets the
-- KEYS and ARGV take.lua would get alone, its limits as numbers (take.lua
-- adds 0 to them: a number stays as it is), in two tables that every take
-- reuses (takeOne keeps neither).
local U = unitsOf(ARGV[#ARGV]) -- every number the batch sends, in order (see the header)
local total, nd, nl, ns, ne = U[1], U[2], U[3], U[4], U[5]
local u = 5 -- the numbers of U read so far
local nk = #KEYS - 2 * ne -- the bucket and marker keys; then the sets
local values = redis.call('MGET', unpack(KEYS, 1, nk))
-- Each epoch's voided set: none (SCARD 0: its takes ask nothing); its
-- members as a table of ids (voidedIds, by one SMEMBERS) when it holds no
-- more members than the batch has takes; else its key (voidedKey: each of
-- its takes asks SISMEMBER).
for e = 1, ne do
  local set = KEYS[nk + 2 * e]
  local count = redis.call('SCARD', set)
  voidedIds[e], voidedKey[e] = nil, nil
  if count > 0 and count <= total then
    local ids = {}
    for _, id in ipairs(redis.call('SMEMBERS', set)) do
      ids[id] = true
    end
    voidedIds[e] = ids
  elseif count > 0 then
    voidedKey[e] = set
  end
end
-- The bucket keys go into state now; a take's marker key
-- (one per take, each a new key) when its take reads it (state's, if an
-- earlier take of the batch wrote the key or read it, else its own read in
-- values, which MGET read at the same instant): state then grows by a few
-- keys a batch, not one a take.
for i = 1, nd do
  state[KEYS[i]] = values[i]
end
for l = 1, nl do
  local text = ARGV[2 + l]
  limits[l] = limitsByText[text] or limitOf(text) -- shared: never changed here; limitOf's cache read inline (a call costs 1k-1.8k)
end
-- A shape: its TTL, n, then each bucket's key and limit (numbers); fast
-- when every bucket is a token bucket (kindOf 't': takeTokens runs it).
local a = 3 + nl -- the next ARGV to read
for s = 1, ns do
  local ttl, sets, n = ARGV[a], U[u + 1], U[u + 2]
  a, u = a + 1, u + 2
  local shape = shapes[s] -- kept from call to call: each field this call reads is set below
  if shape then
    shape[1], shape[2] = ttl, n
  else
    shape = {ttl, n}
    shapes[s] = shape
  end
  fast[shape], unrolled[shape] = true, nil
  if sets > 0 then
    takenOf[shape] = KEYS[nk + 2 * sets - 1]
    voidedOf[shape], voidedSetOf[shape] = voidedIds[sets], voidedKey[sets]
  else
    takenOf[shape], voidedOf[shape], voidedSetOf[shape] = nil, nil, nil
  end
  for i = 1, n do
    local limit = limits[U[u + 2]]
    shape[1 + 2 * i] = KEYS[U[u + 1]]
    u = u + 2
    shape[2 + 2 * i] = limit
    if limit[6] ~= 't' then -- kindOf(rate, windowEnd)
      fast[shape] = nil
    end
  end
  if fast[shape] and n <= 4 and (sets > 0 or ttl == '0') then -- runTokens runs it when its keys are distinct
    unrolled[shape] = runTokens[n]
    for i = 2, n do
      for j = 1, i - 1 do
        if shape[1 + 2 * i] == shape[1 + 2 * j] then
          unrolled[shape] = nil
        end
      end
    end
  end
end
-- keys and args hold the last take's: a take of the same shape changes
-- only its marker and its costs.
local o = 0 -- out's length so far
local keys, args -- made by the first take that runs takeOne
local last, m, n, marker = nil, 0, 0, nd
local r, p = 0, a -- p: the next ARGV to read
if structPack == nil then -- unitsOf read it, unless N was empty
  readStruct()
end
while r < total do
  local shape = shapes[U[u + 1]]
  local run = U[u + 2]
  u = u + 2
  local taken, isFast, ttl, width = takenOf[shape], fast[shape], shape[1], shape[2]
  local voids, voidSet = voidedOf[shape], voidedSetOf[shape]
  local runIt = unrolled[shape]
  if runIt and structPack then -- its reply holds levels: packed only (see runTokens)
    p, o, u = runIt(shape, run, p, o, ARGV, taken, voids, voidSet, ttl, U, u)
    r = r + run
    run = 0
  end
  for _ = 1, run do
    r = r + 1
    local id, c = nil, u -- the id of a take with a taken set; its costs from U[c + 1]
    if taken then
      id, p = ARGV[p], p + 1
    end
    u = u + width
    if isFast then
      local key
      if ttl ~= '0' and not taken then
        marker = marker + 1
        key = KEYS[marker]
      end
      repeat -- takeTokens (see above); break ends the take
        local mv -- the marker's value
        if key then
          mv = state[key]
          if mv == nil then
            mv = values[marker]
          end
        elseif voids then
          if voids[id] then
            mv = 'v'
          end
        elseif voidSet then -- (ifs: see reconcile.lua's mode 'w' on gopher-lua)
          if redis.call('SISMEMBER', voidSet, id) == 1 then
            mv = 'v'
          end
        end
        if mv == 'v' then -- takeMarked, inlined
          o = o + 1
          out[o] = -1
          break
        end
        local firstLarge, slowest, retry = -1, -1, 0
        for i = 1, width do
          local limit = shape[2 + 2 * i]
          local capacity, rate, per, cost = limit[1], limit[2], limit[3], U[c + i]
          local v = state[shape[1 + 2 * i]]
          local level, updated, found
          if not v then -- missing, or deleted by the batch: load's full bucket
            level, updated, found = capacity, now, false
          elseif encodedLevel[v] then -- a text this library wrote: parse's lookup, load's 't'
            level, updated, found = encodedLevel[v], encodedUpdated[v], true
          elseif made[v] and v[1] == encode then -- a token bucket the batch wrote: load's 't'
            level, updated, found = v[2], v[3], true
          else
            local kind, x, y = parse(v)
            level, updated, found = load(kind, x, y, capacity, now)
          end
          if now > updated then -- refill
            level = level + (now - updated) * rate / per
            updated = now
          end
          if level > capacity then
            level = capacity
          end
          levels[i], updateds[i], founds[i], spends[i] = level, updated, found, cost
          if cost > capacity then -- check: too large
            if firstLarge < 0 then
              firstLarge = i - 1
            end
          elseif not (cost == 0 or level >= cost) then -- check: short
            local short = wait(level, cost, rate, per)
            if slowest < 0 or short > retry then -- the longest wait, the first among equals
              slowest, retry = i - 1, short
            end
          end
        end
        if firstLarge >= 0 or slowest >= 0 then
          if firstLarge >= 0 then
            out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, firstLarge, 1, 0
          else
            out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, slowest, 0, retry
          end
          for i = 1, width do
            local limit, level = shape[2 + 2 * i], levels[i]
            out[o + 3 + 2 * i], out[o + 4 + 2 * i] = floorUnits(level), wait(level, limit[1], limit[2], limit[3])
          end
          o = o + 4 + 2 * width
          break
        end
        if taken then
          local list = takenIds[taken] -- markIn, inlined once the set has a list
          if list then
            list[#list + 1] = id
          else
            markIn(taken, id, ttl)
          end
        elseif key then
          remember(key, ttl, 't')
        end
        out[o + 1] = 1
        for i = 1, width do
          local limit = shape[2 + 2 * i]
          local capacity, rate, per = limit[1], limit[2], limit[3]
          local level, updated = levels[i] - spends[i], updateds[i]
          local reset = 0 -- wait(level, capacity, rate, per)
          if not (level >= capacity) then
            local q = (capacity - level) * per / rate -- > 0, or NaN
            if q >= maxWait then -- floor(q) >= maxWait exactly when q is
              reset = maxWait
            else
              reset = q - q % 1 -- floor(q)
              local j = 0
              while j < 2 and level + reset * rate / per < capacity do
                reset = reset + 1
                j = j + 1
              end
            end
          end
          local key, how = shape[1 + 2 * i], nil -- put(found, level, updated, capacity, reset, now)
          if level >= capacity then
            if founds[i] then
              how = false
            end
          else
            local fullAt = updated + reset
            local x = (fullAt - now) / 1000 -- finite, or NaN
            how = x - x % 1 + 1000 -- floor(x) + 1000
          end
          if how ~= nil then -- write and remember: how is a TTL or false, never true
            local v = false
            if how then
              v = cells[key]
              if v then
                v[1], v[2], v[3], v[4] = encode, level, updated, nil
              else
                v = {encode, level, updated}
                cells[key], made[v], cellCount = v, true, cellCount + 1
              end
            end
            if pending[key] == nil then
              written[#written + 1] = key
            end
            state[key], pending[key] = v, how
          end
          local units = level - level % 1 -- floorUnits; inf and NaN go to it
          if not (units < 2 ^ 63 and units > -2 ^ 63) then
            units = floorUnits(level)
          end
          out[o + 2 * i], out[o + 1 + 2 * i] = units, reset
        end
        o = o + 1 + 2 * width
      until true
    else
      if not keys then
        keys, args, dirty = {}, {ARGV[1], '1'}, true
      end
      if shape ~= last then
        local used = m + n
        n, m = width, 0
        args[3] = ttl
        if ttl ~= '0' then
          m = 1
        end
        for i = 1, n do
          local limit, b = shape[2 + 2 * i], 6 * i - 2
          keys[m + i] = shape[1 + 2 * i]
          args[b], args[b + 1], args[b + 2], args[b + 3], args[b + 4] = limit[1], limit[2], limit[3], limit[4], limit[5]
        end
        for i = m + n + 1, used do
          keys[i] = nil
        end
        last = shape
      end
      if m == 1 and taken then
        -- The id's marker key is named (an in-flight limit's holder is the
        -- id it names), not read: takeOne reads 'v' in state when the id
        -- is a member of the voided set.
        local prefix = markerOf[taken]
        if not prefix then
          prefix = string.sub(taken, 1, string.find(taken, '}', 1, true) + 2) .. 'tk:'
          markerOf[taken] = prefix
        end
        local mv = false
        if voids then
          if voids[id] then
            mv = 'v'
          end
        elseif voidSet then
          if redis.call('SISMEMBER', voidSet, id) == 1 then
            mv = 'v'
          end
        end
        keys[1] = prefix .. id
        state[keys[1]] = mv
      elseif m == 1 then
        marker = marker + 1
        keys[1] = KEYS[marker]
        if state[keys[1]] == nil then -- takeOne reads it from state
          state[keys[1]] = values[marker]
        end
      end
      for i = 1, n do
        args[6 * i + 3] = U[c + i] -- take.lua adds 0: a number stays as it is
      end
      markSet, markId = taken, id
      o = appendReply(takeOne(keys, args), o)
      markSet = nil
    end
  end
end
-- The marker sets first: a set that cannot be written (a key of another
-- type) fails the batch before any bucket is written.
for t = 1, #takenSets do -- not ipairs: a C call a set, and one to begin
  local set = takenSets[t]
  redis.call('SADD', set, unpack(takenIds[set]))
  redis.call('PEXPIRE', set, takenTTL[set])
end
for i = 1, #written do
  local key = written[i]
  local how, v = pending[key], state[key]
  if v and made[v] then -- a cell (not type(v) == 'table': a C call a key)
    local encodeIt, level, updated = v[1], v[2], v[3]
    if encodeIt == encode then -- encode, inlined (a Lua call a key)
      if level % 1 == 0 and level ~= 0 and level < 2 ^ 53 and level > -2 ^ 53 then
        v = string.format('%d %d', level, updated) -- the text '%.17g %d' makes of it, without printf's %g
      else
        v = string.format('%.17g %d', level, updated)
      end
      if updated % 1 == 0 then
        if encodedCount >= encodedMax then
          encodedLevel, encodedUpdated, encodedCount = {}, {}, 0
        end
        encodedLevel[v], encodedUpdated[v], encodedCount = level, updated, encodedCount + 1
      end
    else
      v = encodeIt(level, updated, v[4])
    end
  end
  if not how then
    redis.call('DEL', key)
  elseif how == true then
    redis.call('SET', key, v, 'KEEPTTL')
  elseif how == 'persist' then
    redis.call('SET', key, v)
  else
    redis.call('PSETEX', key, pxTexts[how + 0.5] or pxText(how), v) -- SET … PX's write, one argument fewer; pxText's cache read inline
  end
end
local i = o + 1 -- clear the rest of an earlier call's reply
while out[i] ~= nil do
  out[i] = nil
  i = i + 1
end
-- The reply packed (see the header), where Redis has struct: at most
-- replyPackMax numbers a struct.pack call (a C stack's bound), the parts
-- joined; else the array.
if structPack then
  if o <= replyPackMax then
    local f = replyFormats[o]
    if not f then
      f = '<' .. string.rep('d', o)
      replyFormats[o] = f
    end
    return structPack(f, unpack(out, 1, o))
  end
  local parts = {}
  for from = 1, o, replyPackMax do
    local k = o - from + 1
    if k > replyPackMax then
      k = replyPackMax
    end
    local f = replyFormats[k]
    if not f then
      f = '<' .. string.rep('d', k)
      replyFormats[k] = f
    end
    parts[#parts + 1] = structPack(f, unpack(out, from, from + k - 1))
  end
  return table.concat(parts)
end
return out
