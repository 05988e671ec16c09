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
}

// ietfItem is one rule's text, for limit.
type ietfItem struct {
	limit    bucket.Limit
	policy   []byte // the RateLimit-Policy item
	rate     []byte // the RateLimit item's start: the quoted name and ";r="
	capacity []byte // limit.Capacity in decimal (a flavor's x-ratelimit-limit-* value)
}

// newIETFItems returns the cache of pol's rules.
func newIETFItems(pol *policy.Policy) *ietfItems {
	rules := pol.Rules()
	return &ietfItems{rules: rules, items: make([]atomic.Pointer[ietfItem], len(rules))}
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
	it := &ietfItem{limit: a.Limit, rate: append(appendQuoted(nil, a.Rule.Name), ";r="...),
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
