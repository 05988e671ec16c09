// Package bucket holds the admission step of the request flow: after the proxy
// has identified the caller, weighed the request and matched its rules, it
// hands every matching rule's bucket to a Store in one Take, which refills and
// checks all of them and commits every cost only when all can pay (two-phase).
// Once the upstream's usage is known, Reconcile applies the difference between
// actual and reserved cost to the same buckets, once per request.
//
// A bucket is a token bucket (a rate: "10,000 tokens per minute") or a
// calendar quota (a budget: "$500 per month"), by its Limit; one Take covers
// both kinds, two-phase across them. A quota counts the units used within
// the window [WindowStart, WindowEnd) that the caller computed from its
// period and time zone, and starts again from nothing used when a take names
// a later window; a denial waits until the window ends. A window counter
// (Limit.Algorithm SlidingWindow or FixedWindow, window.go) counts the units
// of windows of Per aligned on the store's own clock: the fixed window those
// of the current window, the sliding window those plus the previous window's
// weighted by the share of it still within the last Per.
//
// The arithmetic (tokenbucket.go, quota.go, window.go) is pure: it is a function of a
// state, a Limit, the instant and the cost, and never reads a clock. Only a
// Store reads time (the Memory store an injected clock, a Redis store Redis
// TIME). The arithmetic uses float64 levels and integer microsecond instants
// so that the Redis scripts in lua/ can mirror it line for line under the same
// variable names (level, updated, capacity, rate, per, cost, now; used,
// window, windowStart, windowEnd).
//
// Two stores implement it. Memory keeps the buckets of one process. Redis
// keeps them in Redis (or Redis Cluster) so that every proxy node shares one
// budget per key: each Take is one script (lua/take.lua) that runs the same
// arithmetic, bit for bit, on Redis's clock; each Reconcile one script
// (lua/reconcile.lua) applied once per request id. The scripts are one
// Redis Functions library (lua.Library), loaded once per server and called
// by FCALL (DESIGN.md §4's "one EVALSHA per request" is now one FCALL; by
// EVALSHA still on Redis before 7.0). AsyncReconciler wraps a
// store so that Reconcile only queues its deltas, which a goroutine applies
// in pipelined batches, off the request's path.
//
// When the store is slow or gone (DESIGN.md §7), Guarded wraps it: every
// call gets a deadline (DefaultTimeout, 50ms, measured under load) and runs
// inside a circuit breaker, so that once failures reach a share of the calls
// in a rolling window (or a run of them in a row: a store that is down) every
// call fails at once with ErrUnavailable until a probe finds it back; on a
// Redis Cluster each master has its own breaker (GuardOptions.MasterOf), so
// that one master down fails only the calls with a key on it. A take
// that failed on the client's side may still have been applied by the
// store: it is voided by its request id (Store.Void), which gives back
// exactly what it took, once, even when the void reaches the store first. Rules that
// fail open are then served by a Fallback, this node's in-memory share of
// each limit (ScaleLimit; OverAdmissionOf states what the cluster may admit
// beyond it), and an AsyncReconciler over the Guarded store holds the
// reconciliations it cannot write and replays them when the store returns.
// What the Fallback admitted on quotas and window counters is held by a
// ChargeBack and charged to the shared store once it is back, once, in the
// period it was spent in (chargeback.go).
//
// A hot bucket may be split into shards (shard.go): TakeSharded takes a
// request's cost from one shard, each under a key of its own Redis Cluster
// hash tag, trying the others before it denies, and from several at once
// for a cost above a shard's capacity; ShardLimit splits a Limit so that the
// shards add up to it exactly, and SplitDelta reconciles the shards taken
// from. DenyCache wraps a remote store so that a bucket's repeat denials,
// within the wait the store reported, are answered from memory without a
// round trip (denials only: it can only under-admit).
//
// The contract every Store must meet lives in package bucket/storetest.
package bucket
