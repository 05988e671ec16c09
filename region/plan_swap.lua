-- plan_swap.lua: replace a limit's exchange plan if it is still the one
-- the caller read (package region): one node's step wins, the others see
-- the plan it wrote.
--
-- KEYS[1]  the plan, in the coordinating region's Redis
-- ARGV[1]  the plan the caller read, as stored; '' when there was none
-- ARGV[2]  the next plan
-- ARGV[3]  TTL of the plan, ms
--
-- Reply: 1 written; 0 the plan is no longer the one read (nothing written).

local cur = redis.call('GET', KEYS[1])
if (cur or '') ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
