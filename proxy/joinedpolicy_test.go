package proxy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// joinedStep is one answer of a joined-policy timeline: the rules of pol
// (by position) the request applied, in order, and a capacity variant
// (the limits change with it: a quota's next period, a regional share).
type joinedStep struct {
	rules   []int
	variant int64
}

// joinedRules is the applied rules of step s over pol.
func joinedRules(pol *policy.Policy, s joinedStep) []meter.Applied {
	all := pol.Rules()
	out := make([]meter.Applied, len(s.rules))
	for i, r := range s.rules {
		capacity := 1000 + int64(r) + s.variant
		out[i] = meter.Applied{Rule: &all[r%len(all)], Key: "k", Limit: bucket.Limit{Capacity: capacity, Rate: capacity, Per: time.Minute},
			Status: bucket.Status{Remaining: capacity / 2, Reset: time.Duration(r) * time.Second}}
	}
	return out
}

// writtenBoth writes rules' limit fields on two answers, through items and
// with no cache (each value built in place), and returns both header blocks
// with their Date lines dropped (each is read from the clock).
func writtenBoth(rules []meter.Applied, f Flavor, items *ietfItems) (cached, built string) {
	var c, b fasthttp.ResponseHeader
	c.DisableNormalizing()
	b.DisableNormalizing()
	setLimitHeaders(&c, f, rules, items)
	setLimitHeaders(&b, f, rules, nil)
	return anthropicReset.ReplaceAllString(serverDate.ReplaceAllString(c.String(), "${1}<date>"), "${1}<instant>"),
		anthropicReset.ReplaceAllString(serverDate.ReplaceAllString(b.String(), "${1}<date>"), "${1}<instant>")
}

// TestJoinedPolicySameAsBuilt: with RateLimit-Policy values held per list
// of items (ietfItems.joinedFor), every answer's header block is byte for
// byte the one written with no cache, over a timeline whose lists repeat
// (so that held values are used), alternate with others that begin with
// the same rule, grow, shrink, reorder, run past maxRateLimitItems rules,
// and whose limits change; and a held value is used at all.
func TestJoinedPolicySameAsBuilt(t *testing.T) {
	pol := ietfPolicy(t, 9)
	items := newIETFItems(pol)
	r := rand.New(rand.NewPCG(7, 9))
	lists := [][]int{{0, 1, 2}, {0, 2, 1}, {0, 1}, {0}, {1, 0}, {3, 4, 5, 6}, {3, 4, 5}, {0, 1, 2, 3, 4, 5}, {8, 7}, {2, 2}}
	hits := 0
	for step := range 3000 {
		s := joinedStep{rules: lists[r.IntN(len(lists))]}
		if r.IntN(50) == 0 {
			s.variant = int64(r.IntN(3)) // the limits change now and then
		}
		rules := joinedRules(pol, s)
		if len(rules) <= maxRateLimitItems {
			var texts [maxRateLimitItems]*ietfItem
			for i := range rules {
				texts[i] = items.of(&rules[i])
			}
			if items.joinedFor(texts[:len(rules)]) != nil {
				hits++
			}
		}
		f := []Flavor{FlavorOpenAI, FlavorAnthropic, FlavorAzure}[step%3]
		got, want := writtenBoth(rules, f, items)
		if got != want {
			t.Fatalf("step %d (rules %v, variant %d, flavor %d):\n%s", step, s.rules, s.variant, f, firstDiff(got, want))
		}
	}
	if hits < 1000 {
		t.Fatalf("a held RateLimit-Policy value was used %d times in 3000 answers", hits)
	}
}

// TestJoinedPolicyReplacedWhenStale: a held value whose items are no
// longer their rules' (a limit changed) gives way to the list that
// replaced it, which is then held; one still current is kept, so that two
// lists that begin with the same rule, alternating, allocate nothing.
func TestJoinedPolicyReplacedWhenStale(t *testing.T) {
	pol := ietfPolicy(t, 3)
	items := newIETFItems(pol)
	policyOf := func(s joinedStep) string {
		var h fasthttp.ResponseHeader
		h.DisableNormalizing()
		setLimitHeaders(&h, FlavorOpenAI, joinedRules(pol, s), items)
		return string(h.Peek("RateLimit-Policy"))
	}
	held := func(s joinedStep) bool {
		rules := joinedRules(pol, s)
		texts := make([]*ietfItem, len(rules))
		for i := range rules {
			texts[i] = items.of(&rules[i])
		}
		return items.joinedFor(texts) != nil
	}
	a, b := joinedStep{rules: []int{0, 1}}, joinedStep{rules: []int{0, 2}}
	policyOf(a)
	if !held(a) {
		t.Fatal("step 1 (first answer): its value is not held")
	}
	policyOf(b)
	if !held(a) || held(b) {
		t.Fatalf("step 2 (another current list of the same first rule): a held %v, b held %v; want a kept", held(a), held(b))
	}
	a2 := joinedStep{rules: a.rules, variant: 5}
	if got := policyOf(a2); !strings.Contains(got, fmt.Sprintf(";q=%d;", 1001+5)) {
		t.Fatalf("step 3 (the limits changed): RateLimit-Policy %q holds the old capacity", got)
	}
	if !held(a2) {
		t.Fatal("step 3 (the limits changed): the stale value was not replaced")
	}

	rulesA, rulesB := joinedRules(pol, a2), joinedRules(pol, joinedStep{rules: b.rules, variant: 5})
	var h fasthttp.ResponseHeader
	h.DisableNormalizing()
	setLimitHeaders(&h, FlavorOpenAI, rulesB, items) // its items built before the count
	if n := testing.AllocsPerRun(200, func() {
		h.Reset()
		h.DisableNormalizing()
		setLimitHeaders(&h, FlavorOpenAI, rulesA, items)
		h.Reset()
		h.DisableNormalizing()
		setLimitHeaders(&h, FlavorOpenAI, rulesB, items)
	}); n != 0 {
		t.Fatalf("step 4 (two current lists of one first rule, alternating): %.1f allocations a pair of answers", n)
	}
}

// FuzzJoinedPolicySameAsBuilt: any timeline of rule lists (the data's
// bytes: a list's length, then its rules, then a capacity variant) writes
// through the cache the header block written without it.
func FuzzJoinedPolicySameAsBuilt(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 0, 3, 0, 1, 2, 0, 2, 0, 2, 0, 3, 0, 1, 2, 1})
	f.Add([]byte{2, 0, 1, 0, 2, 0, 2, 0, 2, 0, 1, 0, 2, 0, 2, 1})
	f.Add([]byte{6, 0, 1, 2, 3, 4, 5, 0, 4, 0, 1, 2, 3, 0, 4, 0, 1, 2, 3, 2})
	pol := ietfPolicy(f, 6)
	f.Fuzz(func(t *testing.T, data []byte) {
		items := newIETFItems(pol)
		for step := 0; len(data) > 0 && step < 64; step++ {
			n := 1 + int(data[0])%7
			data = data[1:]
			s := joinedStep{}
			for range n {
				if len(data) == 0 {
					break
				}
				s.rules = append(s.rules, int(data[0])%6)
				data = data[1:]
			}
			if len(data) > 0 {
				s.variant = int64(data[0] % 3)
				data = data[1:]
			}
			if len(s.rules) == 0 {
				return
			}
			rules := joinedRules(pol, s)
			got, want := writtenBoth(rules, []Flavor{FlavorOpenAI, FlavorAnthropic, FlavorAzure}[step%3], items)
			if got != want {
				t.Fatalf("step %d (rules %v, variant %d):\n%s", step, s.rules, s.variant, firstDiff(got, want))
			}
			if !bytes.Contains([]byte(got), []byte("RateLimit-Policy: ")) {
				t.Fatalf("step %d: no RateLimit-Policy field:\n%s", step, got)
			}
		}
	})
}
