package meter

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/llmguard/llmguard/policy"
)

// A request's bucket keys (ruleKeys) depend only on its rules, its
// principal and its model's priced label, and a caller's requests nearly
// always repeat the three: building them cost some 1,000 instructions a
// request and the key string's allocation (callgrind at 042fc51). keyMemo
// keeps the keys last built for a few callers and gives them back for a
// request of the same rules (by address: a policy's rules never change),
// principal and label.

// keyMemoBits sizes keyMemo: 1<<keyMemoBits slots.
const keyMemoBits = 6

// keyMemo keeps, in a direct-mapped table indexed by the principal's key
// id and the label, the keys last built for a request of at most
// inlineRules rules. An entry is used only when the request's rules,
// principal and label are equal to those it was built for, so the keys are
// those ruleKeys.make builds. Its memory is bounded: 1<<keyMemoBits
// entries, each the strings of one principal, one label and one request's
// keys (bounded by the identity's and the config's sizes); an entry also
// holds its rules, and so their policy, until a request of its slot
// replaces it or a reload clears the table (Meter.Reload; a request still
// under the old policy may refill a slot just after). A miss allocates the entry, one small
// object. The zero value is empty. Safe for
// concurrent use.
type keyMemo struct {
	slots [1 << keyMemoBits]atomic.Pointer[keyEntry]
}

// keyEntry is one request's keys and what they were built from.
type keyEntry struct {
	rules [inlineRules]*policy.Rule
	n     int
	p     policy.Principal
	label string
	keys  ruleKeys
}

// slot is the entry of principal p and label: the last 8 bytes of the key
// id (hex digits of a SHA-256, so well spread) and the lengths, hashed.
func (c *keyMemo) slot(p *policy.Principal, label string) *atomic.Pointer[keyEntry] {
	h := uint64(len(p.KeyID))<<32 ^ uint64(len(label))<<16 ^ uint64(len(p.User)) ^ uint64(len(p.Tenant))<<8
	if n := len(p.KeyID); n >= 8 {
		h ^= binary.LittleEndian.Uint64([]byte(p.KeyID[n-8:]))
	}
	h *= 0x9E3779B97F4A7C15
	return &c.slots[h>>(64-keyMemoBits)]
}

// make sets k to the keys of rules for principal p and label, as
// ruleKeys.make does: from the memo when it holds them, else built, and
// kept when there are at most inlineRules rules.
func (c *keyMemo) make(k *ruleKeys, rules []*policy.Rule, p policy.Principal, label string) {
	if len(rules) > inlineRules {
		k.make(rules, p, label)
		return
	}
	s := c.slot(&p, label)
	if e := s.Load(); e != nil && e.n == len(rules) && e.p == p && e.label == label && sameRules(e.rules[:e.n], rules) {
		*k = e.keys
		return
	}
	k.make(rules, p, label)
	e := &keyEntry{n: len(rules), p: p, label: label, keys: *k}
	copy(e.rules[:], rules)
	s.Store(e)
}

// sameRules reports whether a and b, of the same length, hold the same
// rules in the same order.
func sameRules(a, b []*policy.Rule) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// clear empties every slot: after a reload no entry keeps the rules, and
// so the policy, that were in force before.
func (c *keyMemo) clear() {
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
}
