package meter

import (
	"strconv"
	"testing"

	"github.com/llmguard/llmguard/policy"
)

// A request's keys, made as one string, are each rule's ModelKey, past the
// inline rules too.
func TestRuleKeysAreModelKeys(t *testing.T) {
	p := policy.Principal{KeyID: "k1", User: "u:1", Tenant: "acme"}
	var rules []*policy.Rule
	for i := range inlineRules + 4 {
		rules = append(rules, &policy.Rule{Name: "r" + strconv.Itoa(i), Scope: policy.Scope(i % 4), PerModel: i%3 == 0})
	}
	var k ruleKeys
	k.make(rules, p, "gpt-4o")
	for i, r := range rules {
		if got, want := k.key(i), r.ModelKey(p, "gpt-4o"); got != want {
			t.Errorf("rule %d: key %q, want %q", i, got, want)
		}
	}
}
