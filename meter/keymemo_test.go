package meter

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/llmguard/llmguard/policy"
)

// keyMemoRules are rules of every scope, per model or not, two sets of
// the same names at other addresses (a reload).
func keyMemoRules() []*policy.Rule {
	var rules []*policy.Rule
	for set := range 2 {
		for i := range 8 {
			rules = append(rules, &policy.Rule{Name: "r" + strconv.Itoa(i), Scope: policy.Scope(i % 4), PerModel: (i+set)%3 == 0})
		}
	}
	return rules
}

var (
	// keyMemoIDs are key ids, users and tenants: equal strings at other
	// addresses, ids that share their last 8 bytes or lengths, "", and ids
	// that need escaping.
	keyMemoIDs    = []string{"0123456789abcdef", "fedcba9876543210", "ffff456789abcdef", "", "a:b", "u%1", "x{y}", "0000000089abcdef"}
	keyMemoLabels = []string{"gpt-4o", "", "claude-x", "gpt-4o-mini", "o:3", "gpt-5o", "claude-y"} // some of one length
)

// keyMemoCase is one request picked by the bytes of op (cycled).
func keyMemoCase(rules []*policy.Rule, op []byte) ([]*policy.Rule, policy.Principal, string) {
	at := func(i int) int { return int(op[i%len(op)]) }
	picked := make([]*policy.Rule, at(0)%(inlineRules+3))
	for i := range picked {
		picked[i] = rules[at(1+i)%len(rules)]
	}
	id := func(i int) string { return string([]byte(keyMemoIDs[at(i)%len(keyMemoIDs)])) } // a copy: another address
	p := policy.Principal{KeyID: id(8), User: id(9), Tenant: id(10), Plan: id(11), PassThrough: at(12)%2 == 0}
	return picked, p, keyMemoLabels[at(13)%len(keyMemoLabels)]
}

// checkKeys fails unless the memo gives for rules, p and label the keys
// ruleKeys.make builds, key by key.
func checkKeys(t testing.TB, c *keyMemo, rules []*policy.Rule, p policy.Principal, label string) {
	t.Helper()
	var got, want ruleKeys
	c.make(&got, rules, p, label)
	want.make(rules, p, label)
	if got.all != want.all {
		t.Fatalf("%d rules, %+v, %q: keys %q, want %q", len(rules), p, label, got.all, want.all)
	}
	for i := range rules {
		if got.key(i) != want.key(i) {
			t.Fatalf("%d rules, %+v, %q: key %d %q, want %q", len(rules), p, label, i, got.key(i), want.key(i))
		}
	}
}

// TestKeyMemoGivesTheBuiltKeys: the memo's keys are the keys built, for
// requests of varied rules (0 to past inlineRules, of every scope, per
// model or not, two rules of one name), principals (each field varied,
// ids that collide in the memo's slot) and labels, repeated (hits) and
// not.
func TestKeyMemoGivesTheBuiltKeys(t *testing.T) {
	rules := keyMemoRules()
	for seed := range uint64(10) {
		var c keyMemo
		rng := rand.New(rand.NewPCG(seed, 21))
		op := make([]byte, 14)
		for range 3000 {
			switch rng.IntN(4) {
			case 0: // the request before again
			case 1: // a near neighbour: one rule, field or label changed
				op[rng.IntN(len(op))]++
			case 2: // a rule of the same name at another address
				op[1+rng.IntN(inlineRules)] += 8
			default:
				for j := range op {
					op[j] = byte(rng.IntN(256))
				}
			}
			picked, p, label := keyMemoCase(rules, op)
			checkKeys(t, &c, picked, p, label)
		}
	}
}

// FuzzKeyMemo: any sequence of requests gets from the memo the keys
// ruleKeys.make builds.
func FuzzKeyMemo(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 1, 0, 3, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{4, 9, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 0, 2, 4, 9, 1, 2, 3, 4, 5, 6, 2, 2, 3, 4, 0, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 14*200 {
			return
		}
		rules := keyMemoRules()
		var c keyMemo
		for i := 0; i < len(ops); i += 14 {
			picked, p, label := keyMemoCase(rules, ops[i:min(i+14, len(ops))])
			checkKeys(t, &c, picked, p, label)
		}
	})
}

// After clear (a reload) no slot holds an entry, so no replaced policy's
// rules stay reachable from the memo; the keys are then built anew.
func TestKeyMemoClearForgetsEveryPolicy(t *testing.T) {
	rules := keyMemoRules()
	var c keyMemo
	rng := rand.New(rand.NewPCG(7, 7))
	op := make([]byte, 14)
	for range 500 {
		for j := range op {
			op[j] = byte(rng.IntN(256))
		}
		picked, p, label := keyMemoCase(rules, op)
		checkKeys(t, &c, picked, p, label)
	}
	held := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			held++
		}
	}
	if held == 0 {
		t.Fatal("no slot filled: the test shows nothing")
	}
	c.clear()
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			t.Fatalf("slot %d still holds an entry after clear", i)
		}
	}
	picked, p, label := keyMemoCase(rules, op)
	checkKeys(t, &c, picked, p, label)
}
