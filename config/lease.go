package config

import (
	"time"

	"github.com/llmguard/llmguard/spec"
)

// checkLease reports what is wrong with limit l's lease, under field f
// (limits[i].lease). Leases are for tenant and global limits: a node keeps
// lease state per bucket, which per key or per user would grow with the
// callers. A lease is taken from the shared bucket as one take,
// and a take above the bucket's capacity never passes: so its size is at
// most the burst. A quota refuses leases: it does not refill, so what a
// node that died held would be lost to the quota until the period ends.
// The TTL is bounded below so that a lease lives long enough to be spent
// (each one costs a take, and a return when unspent), and above so that
// unused units do not sit idle on one node while others are denied.
func checkLease(p *problems, f string, l Limit, scale float64) {
	ls := l.Lease
	if l.Scope == spec.ScopeKey.String() || l.Scope == spec.ScopeUser.String() {
		// Each node holds lease state per bucket for a while after its last
		// use: per key or per user, callers (in pass-through, whoever
		// presents a new key) would grow it at will. A key's or a user's
		// bucket is rarely the hot one anyway.
		p.add(f, "leases apply to tenant and global limits only, not to scope %s: each node keeps a lease per bucket, so per %s the state would grow with the callers (a hot key is a tenant's or the global bucket)", l.Scope, l.Scope)
		return
	}
	if l.Quota != 0 {
		p.add(f, "leases apply to token buckets (rate/burst) only, not to a quota: a quota does not refill, so what a node that died held would be lost until the period ends")
		return
	}
	switch {
	case !(ls.Size > 0):
		p.add(f+".size", "must be a positive number of units (got %v)", ls.Size)
	case ls.Size*scale < 1:
		p.add(f+".size", "must hold at least one unit (got %v)", ls.Size)
	case l.Burst > 0 && ls.Size > l.Burst:
		p.add(f+".size", "must be at most the burst (%v): a lease is taken as one take, and a take above the bucket's capacity never passes (got %v)", l.Burst, ls.Size)
	}
	switch d := time.Duration(ls.TTL); {
	case ls.TTL == invalidDuration:
		checkDuration(p, f+".ttl", ls.TTL)
	case d < MinLeaseTTL || d > MaxLeaseTTL:
		p.add(f+".ttl", "must be from %v to %v (got %v): shorter, a lease expires before it is spent; longer, unused units sit idle on one node while others are denied", MinLeaseTTL, MaxLeaseTTL, d)
	}
}
