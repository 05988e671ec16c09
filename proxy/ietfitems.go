package proxy

import (
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// ietfItems holds, for each rule of one policy, the text the RateLimit
// fields write for it that depends only on the rule and its limit: the
// whole RateLimit-Policy item (`"name";q=…;w=…;llmguard-unit="…"`), the
// quoted name and ";r=" RateLimit's item starts with, and the capacity a
// flavor's limit field gives. A request's rules and limits
// are nearly always those of the request before, and building the text
// (quoting, four numbers, the refill time in 128 bits) cost a third of
// the limit headers' instructions. An item is used only for the very rule
// (by address, in the policy the cache was made for) and limit (==, as
// sameLimit) it was built for; a limit that changes (a quota's next period, a regional
// share) is built again and replaces it. Its memory is one item per rule,
// dropped with the policy on reload. A nil *ietfItems caches nothing.
// Safe for concurrent use.
type ietfItems struct {
	rules []policy.Rule
	items []atomic.Pointer[ietfItem]
	// joined holds, for each rule, the RateLimit-Policy value of one list
	// of items that begins with that rule's (see joinedPolicy).
	joined []atomic.Pointer[joinedPolicy]
}

// ietfItem is one rule's text, for limit.
type ietfItem struct {
	limit    bucket.Limit
	at       int    // the rule's position in the cache's rules
	policy   []byte // the RateLimit-Policy item
	rate     []byte // the RateLimit item's start: the quoted name and ";r="
	capacity []byte // limit.Capacity in decimal (a flavor's x-ratelimit-limit-* value)
}

// joinedPolicy is a whole RateLimit-Policy value: the policy texts of
// items[:n] joined with ", ", as writeIETFHeaders joins them. A value
// depends only on its items (immutable, each for one rule and limit), and
// a request's list of items is nearly always the one before: copying the
// value whole costs an answer about 70 instructions where joining it cost
// 250 (whole-process callgrind, 1 KiB warm JSON c32, three rules; perf32).
type joinedPolicy struct {
	items [maxRateLimitItems]*ietfItem
	n     int
	text  []byte
}

// newIETFItems returns the cache of pol's rules.
func newIETFItems(pol *policy.Policy) *ietfItems { return ietfItemsOf(pol.Rules()) }

// ietfItemsOf returns the cache of rules (a policy's Rules).
func ietfItemsOf(rules []policy.Rule) *ietfItems {
	return &ietfItems{rules: rules, items: make([]atomic.Pointer[ietfItem], len(rules)),
		joined: make([]atomic.Pointer[joinedPolicy], len(rules))}
}

// joinedFor returns the RateLimit-Policy value held for the items texts
// (every one of them an item of c, non-nil), or nil when none is held
// (or c holds no values: an ietfItems without joined).
func (c *ietfItems) joinedFor(texts []*ietfItem) []byte {
	if texts[0].at >= len(c.joined) {
		return nil
	}
	j := c.joined[texts[0].at].Load()
	if j == nil || j.n != len(texts) {
		return nil
	}
	for i, t := range texts {
		if j.items[i] != t {
			return nil
		}
	}
	return j.text
}

// keepJoined holds text, the RateLimit-Policy value of texts (as
// joinedFor), in the slot of texts' first rule when that slot is empty or
// holds a list of which an item is no longer its rule's (a limit that
// changed): a list still current is kept, so that two lists that begin
// with the same rule and alternate do not replace each other on every
// answer (an allocation each); the one not held is joined as before.
func (c *ietfItems) keepJoined(texts []*ietfItem, text []byte) {
	if texts[0].at >= len(c.joined) {
		return
	}
	slot := &c.joined[texts[0].at]
	if old := slot.Load(); old != nil && c.current(old) {
		return
	}
	j := &joinedPolicy{n: len(texts), text: append([]byte(nil), text...)}
	copy(j.items[:], texts)
	slot.Store(j)
}

// current reports whether every item of j is still its rule's.
func (c *ietfItems) current(j *joinedPolicy) bool {
	for _, it := range j.items[:j.n] {
		if c.items[it.at].Load() != it {
			return false
		}
	}
	return true
}

// of returns a's text when a's rule is one of c's: the cached one when
// its limit is a's, else built and cached. nil when the rule is not c's
// (the writer then builds the text in place, allocating nothing).
func (c *ietfItems) of(a *meter.Applied) *ietfItem {
	i := c.index(a.Rule)
	if i < 0 {
		return nil
	}
	if it := c.items[i].Load(); it != nil && sameLimit(&it.limit, &a.Limit) {
		return it
	}
	it := &ietfItem{limit: a.Limit, at: i, rate: append(appendQuoted(nil, a.Rule.Name), ";r="...),
		capacity: strconv.AppendInt(nil, a.Limit.Capacity, 10)}
	it.policy = appendPolicyItem(nil, a)
	c.items[i].Store(it)
	return it
}

// sameLimit is *x == *y, field by field and inlined: the struct's ==
// is a call to its generated equality and memequal (whole-process
// callgrind, 1 KiB warm JSON c32: of, inclusive, 342 → 258 instructions
// an answer of three rules).
// TestSameLimitIsEqual fails when bucket.Limit gains a field this does
// not compare.
func sameLimit(x, y *bucket.Limit) bool {
	return x.Capacity == y.Capacity && x.Rate == y.Rate && x.Per == y.Per &&
		x.WindowStart == y.WindowStart && x.WindowEnd == y.WindowEnd &&
		x.Concurrent == y.Concurrent && x.Algorithm == y.Algorithm
}

// appendPolicyItem appends a's RateLimit-Policy item to b:
// `"name";q=<capacity>;w=<seconds>;llmguard-unit="<unit>"`.
func appendPolicyItem(b []byte, a *meter.Applied) []byte {
	b = appendQuoted(b, a.Rule.Name)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, a.Limit.Capacity, 10)
	b = append(b, ";w="...)
	b = strconv.AppendInt(b, ceilSeconds(window(a.Limit)), 10)
	b = append(b, `;llmguard-unit="`...)
	b = append(b, a.Rule.Unit.String()...)
	return append(b, '"')
}

// index is r's position in c.rules, -1 when r is not one of them (another
// policy's, a copy, or c is nil).
func (c *ietfItems) index(r *policy.Rule) int {
	if c == nil || len(c.rules) == 0 || r == nil {
		return -1
	}
	off := uintptr(unsafe.Pointer(r)) - uintptr(unsafe.Pointer(&c.rules[0]))
	i := off / unsafe.Sizeof(c.rules[0])
	if off%unsafe.Sizeof(c.rules[0]) != 0 || i >= uintptr(len(c.rules)) || &c.rules[i] != r {
		return -1
	}
	return int(i)
}
