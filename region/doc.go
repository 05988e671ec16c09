// Package region moves unused share of a global limit between regions,
// each with its own Redis, without ever letting the regions together admit
// more than the limit (config region_exchange:).
//
// A global limit split between regions (regions: {eu: 0.5, us: 0.5}) is
// enforced by each region alone: a node of region r takes from a bucket in
// its own Redis, keyed by r, whose capacity and refill rate are share_r of
// the limit's (policy.Regional, policy.Rule.LimitAt). Without the exchange
// the shares are the configured ones, and the regions together admit at
// most capacity + rate × elapsed. The exchange changes the shares
// while keeping that bound, as follows.
//
// Demand. Each node counts the units its region asked of the limit
// (admitted or denied; policy.Regional.NoteDemand) and adds them, every
// interval, to a counter of that interval in its own Redis. Intervals are
// counted on the node's clock: demand only steers the shares, so a clock
// off by a little moves some demand to the next interval, never a share
// past what is safe.
//
// The plan. One record per limit in the coordinating region's Redis (the
// first of the limit's regions by name) holds the plan: an epoch and a
// share for every region. Any node may advance it, once per pace interval,
// by reading every region's demand of the last whole interval and
// computing the next shares with Next (a deterministic function: a
// water-filling of the configured total, weighted by configured share and
// capped by demand, each share moving at most max_step), then swapping the
// plan in if it is still the one it read (plan_swap.lua): one node wins.
//
// Replication. Each region's Redis holds that region's own share record:
// the epoch it holds and a short history of (written at, share), stamped
// with that Redis's clock (share_write.lua). A node replicates a plan to
// every region whose record is behind it in two phases: first every region
// whose share does not grow (checked and written atomically in the
// region's Redis), then, only when all of them hold the new epoch, the
// regions whose share grows. A plan is advanced only once every region
// holds its epoch, and records never go back an epoch. So at every
// instant the shares the records hold (a missing record standing for its
// region's floor) sum to at most the configured total T ≤ 1 (lemma 1).
//
// Applying. Every interval E each node reads its own region's record (and
// that Redis's clock, X) and holds, until 2E later by its own clock, the
// least share the record held over [X − L, X], L = Fill + 3E (Fill =
// capacity/rate of the whole limit: the time its bucket takes to fill), or
// the floor when the history does not reach back that far or the hold has
// run out. A share that shrinks is thus used at once; one that grows is
// used only once it has held for L.
//
// Why the regions together never admit more than capacity + rate ×
// elapsed (T ≤ 1 times it). Let d < E be the longest a take is in flight
// (store.timeout), V = 2E the validity of a read and W = 3E ≥ V + d.
// Define for each region σ_r(τ) = min of its record over [τ − W, τ − V −
// d]: every such window holds τ − V − d, so by lemma 1 Σ σ_r(τ) ≤ T at
// every τ. A take executed at t was issued at most V after the read it
// uses (at τL ≤ t) and executed at most d later, so [t − Fill − W, t − V −
// d] ⊂ [τL − L, τL]: the share m it uses is at most σ_r(τ) for every τ in
// [t − Fill, t]. A bucket whose every take uses such an m holds at most
// what a bucket of share σ_r(τ) would (by induction over its takes: over a
// gap shorter than Fill both refill at rate at least m × rate, and after a
// longer one the σ bucket is full at ≥ m × capacity, which is all ours can
// hold). The σ buckets together hold at most T × capacity at the start
// and refill at most T × rate: so do ours.
//
// Partitions and failures. A node that cannot reach a peer's Redis cannot
// advance or replicate the plan: shares stay where they are, each region
// applying its own record (reachable in its own Redis), which is safe by
// lemma 1. A node that cannot read its own record falls to its floor 2E
// after its last read. A region whose Redis lost its data (a restart
// without persistence) starts a new history: its nodes hold its floor
// until the history reaches back L. A lost plan with records left is
// restarted at every region's floor (every write a shrink). A first start
// (no plan, no record) writes the configured shares as a new history: the
// regions hold their floors for L, then their configured shares. Records
// live under a fingerprint of the limit's regions, shares and floors: a
// reload that changes them starts afresh the same way.
//
// What it costs: per exchanged limit and interval, a node makes two calls
// to its own Redis (its demand, its share), reads the plan and every
// region's record, and the one node that advances the plan reads every
// region's demand, swaps the plan and writes every record: a few small
// calls per node every E (default 5 s), none on the request path. A grown share takes effect
// Fill + 3E after the plan that grants it (a shrunk one at once), so the
// exchange follows demand that lasts longer than that.
package region
