package config

import (
	"math"
	"time"
)

// In-flight limits (unit: concurrent) bounds; bucket.MaxSlots,
// bucket.MinSlotLease and bucket.MaxSlotLease hold the same numbers, which
// a test keeps in step (config does not import bucket).
const (
	// MaxInFlight is the largest max of an in-flight limit.
	MaxInFlight = 100000
	// MinSlotLease and MaxSlotLease bound slot_lease.
	MinSlotLease = time.Second
	MaxSlotLease = 24 * time.Hour
	// slotLeaseMargin is what the default slot_lease adds to the longest
	// upstream timeout.
	slotLeaseMargin = 30 * time.Second
)

// defaultSlotLease is the longest upstream timeout plus slotLeaseMargin,
// within [MinSlotLease, MaxSlotLease]. Upstream timeouts must have their
// defaults already.
func (c *Config) defaultSlotLease() time.Duration {
	var longest time.Duration
	for _, u := range c.Upstreams {
		longest = max(longest, time.Duration(u.Timeout))
	}
	return min(max(longest+slotLeaseMargin, MinSlotLease), MaxSlotLease)
}

// checkSlots reports what an in-flight limit (field f) sets wrongly: a max
// that is not a whole number in [1, MaxInFlight]; a slot_lease outside
// [MinSlotLease, MaxSlotLease] or shorter than an upstream's timeout; and
// the keys of other kinds of limits, and the features in-flight limits do
// not support (shards, lease, regions: each would split or hold slots
// outside the one shared set of holders).
func (c *Config) checkSlots(p *problems, f string, l Limit) {
	if !(l.Max >= 1) || l.Max > MaxInFlight || l.Max != math.Trunc(l.Max) {
		p.add(f+".max", "must be a whole number of requests from 1 to %d (got %v)", MaxInFlight, l.Max)
	}
	lease := time.Duration(l.SlotLease)
	switch {
	case l.SlotLease == invalidDuration:
		checkDuration(p, f+".slot_lease", l.SlotLease)
	case lease < MinSlotLease || lease > MaxSlotLease:
		p.add(f+".slot_lease", "must be from %v to %v (got %v)", MinSlotLease, MaxSlotLease, lease)
	default:
		for i, u := range c.Upstreams {
			if time.Duration(u.Timeout) > lease {
				p.add(f+".slot_lease", "must be at least upstreams[%d].timeout (%v): a response may last that long, and must hold its slot throughout (got %v)",
					i, time.Duration(u.Timeout), lease)
			}
		}
	}
	if l.Rate != 0 || l.Per != 0 || l.Burst != 0 || l.Quota != 0 || l.Period != "" || l.Timezone != "" || len(l.WarnAt) > 0 {
		p.add(f, "an in-flight limit (unit: concurrent) counts requests in flight: set max (and slot_lease), not rate, per, burst, quota, period, timezone or warn_at")
	}
	if l.Shards > 1 {
		p.add(f+".shards", "is not supported on an in-flight limit")
	}
	if l.Lease != nil {
		p.add(f+".lease", "is not supported on an in-flight limit (slots are held per request, not leased per node)")
	}
	if l.Algorithm != "" {
		p.add(f+".algorithm", "is not supported on an in-flight limit: it counts requests in flight, not a rate")
	}
	if len(l.Regions) > 0 {
		p.add(f+".regions", "is not supported on an in-flight limit")
	}
}

// checkShadow reports what a shadow limit (field f) combines with that it
// does not support: shards and lease (a shadow take is one plain take of
// its own buckets, after the real limits admitted).
func checkShadow(p *problems, f string, l Limit) {
	if !l.Shadow {
		return
	}
	if l.Shards > 1 {
		p.add(f+".shards", "is not supported on a shadow limit")
	}
	if l.Lease != nil {
		p.add(f+".lease", "is not supported on a shadow limit")
	}
	if l.Waits() {
		p.add(f+".on_limit", "wait means nothing on a shadow limit: it never denies")
	}
}
