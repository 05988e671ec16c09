package bucket

import (
	"context"

	"github.com/maypok86/otter/v2"
)

// ScaleLimit returns one node's share of l, for a cluster of nodes proxy
// nodes that each enforce it alone while the shared store is unavailable:
// Capacity and Rate divided by nodes, rounded down, and at least one unit
// each; Per is unchanged. A quota's share is Capacity divided likewise for
// the same window; its Rate and Per are kept as they are (unused); a window
// counter's likewise, per window of Per. nodes
// below 1 counts as 1 (l itself). It does not validate l.
//
// The one-unit floor keeps a limit smaller than nodes usable on every node,
// at the price of admitting more than the limit: nodes units per Per
// instead of Rate (see OverAdmissionOf).
func ScaleLimit(l Limit, nodes int) Limit {
	n := int64(max(1, nodes))
	s := l
	s.Capacity = max(1, l.Capacity/n)
	if !l.IsQuota() && !l.Concurrent && !l.IsWindow() {
		s.Rate = max(1, l.Rate/n)
	}
	return s
}

// OverAdmission is how much more than a limit a cluster can admit while
// every node serves it from its Fallback, as computed by OverAdmissionOf.
type OverAdmission struct {
	// Node is one node's share of the limit (ScaleLimit).
	Node Limit
	// Burst is what the cluster can admit at once from fallback buckets
	// that are all full, as a fraction of the limit's Capacity:
	// nodes × max(Node.Capacity, maxCost) / Capacity. It is at most 1
	// when Capacity >= nodes and no request costs more than a node's
	// share.
	Burst float64
	// Rate is the cluster's sustained rate from its fallback buckets as a
	// fraction of the limit's: nodes × Node.Rate / Rate; at most 1 when
	// Rate >= nodes. For a quota, what the nodes' shares admit in one
	// window as a fraction of Capacity: nodes × Node.Capacity / Capacity.
	Rate float64
	// Factor is the worst case, over every window of time, of the units
	// the cluster admits in the window divided by the units the limit
	// admits in a window as long that starts with a full bucket
	// (Capacity + Rate × length / Per): max(1 + Burst, Rate). The worst
	// window starts just before the outage: the shared bucket's full burst
	// is spent, then the store fails and every node's fresh fallback
	// bucket is full, so the cluster admits 1 + Burst times the burst at
	// once. Over a longer outage the ratio tends to Rate. About 2 when
	// the limit is at least nodes units and requests fit a node's share.
	// For a quota the worst window is the quota's own: the shared quota
	// used up, then every node's share of it: 1 + Burst. That worst case
	// is now only a node's that never read the quota in the period: a
	// Fallback told the shared levels (ObserveLevels, fed by meter from
	// every take the store answered) starts node k's quota at
	// min(Node.Capacity, max(0, R_k) / nodes), R_k the units the shared
	// quota had left at that node's last take in the same period, moved
	// by the node's own settlements since (ObserveDelta), so the
	// fallbacks' spend F is at most the sum over nodes of those starts,
	// at most max_k R_k: what remained at the stalest node's last look
	// (Node.Capacity for a node that did not look in the period, whose
	// reading the LRU forgot, or whose limit changed since). A ChargeBack
	// (meter.Options.Charges) bounds a period's total by max(Capacity,
	// U + F), U the shared use when the outage began, which it charges
	// the fallbacks' spend to once the store is back; with every node's
	// reading in the period, U + F is at most Capacity plus what the
	// shared quota spent between the stalest reading and the outage.
	// Without the charge the total was Capacity + F wherever in the
	// period the outage fell. Likewise for a window counter within the
	// window it was read in. Factor itself knows no readings: it stays
	// the unread worst case.
	Factor float64
}

// OverAdmissionOf returns the over-admission of limit l when each of nodes
// proxy nodes (below 1 counts as 1) enforces ScaleLimit(l, nodes) on its
// own, and no request costs more than maxCost units; maxCost <= 0 means
// requests no larger than a node's share (Fallback admits a larger one, up
// to Capacity, only from a full node bucket, leaving the rest as debt: it
// raises the burst, not the sustained rate). The figures assume every node
// is counted in nodes: k nodes more than nodes each add their own
// share. It does not validate l.
func OverAdmissionOf(l Limit, nodes int, maxCost int64) OverAdmission {
	n := max(1, nodes)
	node := ScaleLimit(l, n)
	burst := node.Capacity
	if maxCost > burst {
		burst = min(maxCost, l.Capacity)
	}
	o := OverAdmission{
		Node:  node,
		Burst: float64(n) * float64(burst) / float64(l.Capacity),
	}
	if l.IsQuota() || l.Concurrent || l.IsWindow() {
		o.Rate = float64(n) * float64(node.Capacity) / float64(l.Capacity)
	} else {
		o.Rate = float64(n) * float64(node.Rate) / float64(l.Rate)
	}
	o.Factor = max(1+o.Burst, o.Rate)
	return o
}

// FallbackOptions configures NewFallback. The zero value is a usable
// default.
type FallbackOptions struct {
	// Nodes is the expected number of proxy nodes sharing each limit; every
	// limit is scaled with ScaleLimit(limit, Nodes). Below 1 means 1.
	Nodes int
	// Memory configures the in-memory store that holds the node's buckets.
	Memory MemoryOptions
	// MaxSeen bounds how many quotas and window counters the Fallback
	// remembers the shared level of (ObserveLevels), least recently used
	// forgotten first; 0 means DefaultFallbackSeen (2^16 keys).
	MaxSeen int
}

// Fallback is a Store for rules that fail open: while the shared store is
// unavailable (Guarded returns ErrUnavailable) the proxy takes those rules'
// costs here instead, from buckets held in this process, each limit scaled
// to this node's share (ScaleLimit). A quota or window counter whose
// shared level the node read in the same period (ObserveLevels: the
// Remaining of its last take the store answered, moved by the node's
// reconciliations since, ObserveDelta, remembered in an LRU of
// FallbackOptions.MaxSeen keys) starts at min(share, max(0, Remaining) /
// nodes), nothing when that reading found it spent; any other bucket the
// Fallback has not seen starts full. A reading seeds the bucket once, at
// the first fallback take after it, and only lowers what the node's
// bucket has left. Token buckets are not seeded: see ObserveLevels. A
// bucket keeps its level between outages, so an outage that flaps does not
// refill it. What the cluster can then admit beyond each limit is
// OverAdmissionOf's Factor.
//
// Items and deltas carry the configured (unscaled) limits and the request's
// real costs. A cost above the node's share but within the limit's
// Capacity passes only when the node's bucket is full (a quota: nothing
// used of the node's share in the window), and leaves it in debt (a quota:
// used beyond its share) by the difference, so a request the shared store
// would admit is not refused as too large; a cost above Capacity is
// TooLarge, as in the shared store. Statuses in a Decision describe the
// node's buckets.
//
// Reconcile the requests it admitted here, not in the shared store: their
// reservation was never taken there. What they cost on quotas and window
// counters is charged to the shared store later, once it is back, by a
// ChargeBack (meter.Options.Charges), in the period it was spent in. It is safe for concurrent use. Create
// one with NewFallback; Close stops its sweep.
type Fallback struct {
	mem   *Memory
	nodes int
	seen  *otter.Cache[string, *seenLevel] // ObserveLevels' readings, by key
}

var _ Store = (*Fallback)(nil)

// NewFallback returns a Fallback configured by o. It starts the Memory's
// sweep goroutine unless o.Memory.SweepEvery is negative.
func NewFallback(o FallbackOptions) *Fallback {
	return &Fallback{mem: NewMemory(o.Memory), nodes: max(1, o.Nodes), seen: newSeen(o.MaxSeen)}
}

// Nodes returns the number of nodes each limit is divided by.
func (f *Fallback) Nodes() int { return f.nodes }

// Close stops the sweep goroutine; see Memory.Close.
func (f *Fallback) Close() error { return f.mem.Close() }

// Take implements Store over the node's share of each limit. Items are
// checked against their configured limits (an error wraps ErrInvalid, as
// Memory's; a ctx already done fails the call). A cost above the node's
// share is taken as the share (so the bucket must be full) and the rest is
// charged as debt right after, outside the take's lock. A take with a
// requestID is remembered for Void, as Memory's.
func (f *Fallback) Take(ctx context.Context, requestID string, items []Item) (Decision, error) {
	if err := validateItems(items); err != nil {
		return Decision{}, err
	}
	scaled := make([]Item, len(items))
	var debts []Delta
	var debtAt []int
	for i, it := range items {
		node := ScaleLimit(it.Limit, f.nodes)
		scaled[i] = Item{Key: it.Key, Limit: node, Cost: it.Cost}
		if it.Limit.IsQuota() || it.Limit.IsWindow() {
			f.seed(&items[i], node)
		}
		if it.Cost > node.Capacity && it.Cost <= it.Limit.Capacity {
			scaled[i].Cost = node.Capacity
			debts = append(debts, Delta{Key: it.Key, Limit: node, Units: it.Cost - node.Capacity})
			debtAt = append(debtAt, i)
		}
		// A cost above it.Limit.Capacity stays as is: Memory finds it
		// too large for the node's share too.
	}
	d, err := f.mem.Take(ctx, requestID, scaled)
	if err != nil || !d.Allowed || len(debts) == 0 {
		return d, err
	}
	if err := f.mem.Reconcile(context.WithoutCancel(ctx), "", debts); err != nil {
		return Decision{}, err // not reached: the deltas are valid
	}
	for j, i := range debtAt {
		extra := debts[j].Units
		d.Buckets[i].Remaining -= extra
		if debts[j].Limit.IsQuota() {
			continue // a quota still resets when its window ends
		}
		// Each unit of debt takes Per/Rate longer to refill.
		_, rate, per := debts[j].Limit.floats()
		d.Buckets[i].Reset += micros(wait(0, float64(extra), rate, per))
	}
	return d, nil
}

// Held returns the status of the node's bucket of key under l (scaled to
// the node's share), as a take of no cost would report it but without
// seeding it from a reading first (ObserveLevels): what the fallback
// itself has taken, for tests and debugging. Errors as Take's.
func (f *Fallback) Held(ctx context.Context, key string, l Limit) (Status, error) {
	d, err := f.mem.Take(ctx, "", []Item{{Key: key, Limit: ScaleLimit(l, f.nodes)}})
	if err != nil {
		return Status{}, err
	}
	return d.Buckets[0], nil
}

// Reconcile implements Store over the node's share of each limit: the
// deltas' units apply in full to the node's buckets, once per requestID.
func (f *Fallback) Reconcile(ctx context.Context, requestID string, deltas []Delta) error {
	if err := validateDeltas(requestID, deltas); err != nil {
		return err
	}
	scaled := make([]Delta, len(deltas))
	for i, dl := range deltas {
		scaled[i] = Delta{Key: dl.Key, Limit: ScaleLimit(dl.Limit, f.nodes), Units: dl.Units}
	}
	return f.mem.Reconcile(ctx, requestID, scaled)
}

// Void implements Store over the node's share of each limit: a take of
// requestID committed here is refunded its whole cost (its debt included),
// once; see Memory.Void.
func (f *Fallback) Void(ctx context.Context, requestID string, items []Item) error {
	if err := validateVoid(requestID, items); err != nil {
		return err
	}
	scaled := make([]Item, len(items))
	for i, it := range items {
		scaled[i] = Item{Key: it.Key, Limit: ScaleLimit(it.Limit, f.nodes), Cost: it.Cost}
	}
	return f.mem.Void(ctx, requestID, scaled)
}
