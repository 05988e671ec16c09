package meter

import (
	"sync/atomic"
	"unsafe"

	"github.com/llmguard/llmguard/policy"
)

// A request's series bundles (bundles.go) are found in their seriesCaches
// by label values: a hash of four strings and a comparison for each, about
// 900 instructions for the flow and 370 for each rule, two thirds of what
// a request's admission metrics cost. Requests nearly always come back
// with the flavor, model, tenant and rules of a request before, so the
// bundles last found are kept in a few slots and compared by their label
// values before any hash: bundleMemo.

// ruleMemoBits sizes bundleMemo's rule slots: 1<<ruleMemoBits of them.
const ruleMemoBits = 6

// bundleMemo keeps the series bundles last found: one flow bundle, and
// 1<<ruleMemoBits rule bundles in a table indexed by the rule's address
// (so that a request's few rules do not evict one another). A bundle
// carries the label values it was found by, so a kept one is used only
// for a request of those very values and is the one the seriesCache gives
// for them: the series recorded are those a lookup finds. Its memory is
// bounded: 1+1<<ruleMemoBits pointers to bundles the seriesCaches hold
// (or held, before a reset or past their bound). Keeping a bundle
// allocates nothing. The zero value is empty. Safe for concurrent use.
type bundleMemo struct {
	flow  atomic.Pointer[flowSeries]
	rules [1 << ruleMemoBits]atomic.Pointer[ruleSeries]
}

// flowOf returns the kept flow bundle of x, nil when the one kept is for
// another flavor, model or tenant. The values compared are x's before the
// label caps: one equal to the kept bundle's label passes the caps as that
// label (a value that passed a labelCap is passed as it is for ever after,
// and "other" is always "other").
func (b *bundleMemo) flowOf(x *Exchange) *flowSeries {
	if fs := b.flow.Load(); fs != nil && fs.model == x.modelLabel && fs.tenant == x.req.Principal.Tenant && fs.flavor == x.req.Flavor.String() {
		return fs
	}
	return nil
}

// slot is rule's entry in b.rules: its address hashed (Fibonacci hashing).
func (b *bundleMemo) slot(rule *policy.Rule) *atomic.Pointer[ruleSeries] {
	h := uint64(uintptr(unsafe.Pointer(rule))) * 0x9E3779B97F4A7C15
	return &b.rules[h>>(64-ruleMemoBits)]
}

// ruleOf returns the kept bundle of rule's limit and tenant (a label, as
// capped), nil when rule's slot keeps another.
func (b *bundleMemo) ruleOf(rule *policy.Rule, tenant string) *ruleSeries {
	if rs := b.slot(rule).Load(); rs != nil && rs.limit == rule.Name && rs.tenant == tenant {
		return rs
	}
	return nil
}

// forgetRules empties the rule slots (Metrics.Prepare, as it resets the
// rule bundles' cache).
func (b *bundleMemo) forgetRules() {
	for i := range b.rules {
		b.rules[i].Store(nil)
	}
}
