package proxy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// manyApplied is n applied rules of every unit, named l0000…, with random
// remaining amounts (some in debt) and quotas among them.
func manyApplied(r *rand.Rand, n int) []meter.Applied {
	units := []policy.Unit{policy.UnitRequests, policy.UnitTokens, policy.UnitInputTokens, policy.UnitOutputTokens, policy.UnitUSD}
	out := make([]meter.Applied, n)
	for i := range out {
		capacity := int64(1 + r.IntN(1_000_000))
		rule := &policy.Rule{Name: fmt.Sprintf("l%04d", i), Scope: policy.Scope(r.IntN(4)), Unit: units[r.IntN(len(units))]}
		limit := bucket.Limit{Capacity: capacity, Rate: capacity, Per: time.Minute}
		if r.IntN(4) == 0 {
			start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			limit = bucket.Quota(capacity, start, start.AddDate(0, 1, 0))
		}
		out[i] = meter.Applied{Rule: rule, Key: "k", Limit: limit, Reserved: 1,
			Status: bucket.Status{Remaining: capacity - r.Int64N(capacity+capacity/4), Reset: time.Duration(r.IntN(3600)) * time.Second}}
	}
	return out
}

// headerBytes is the size of every header of h as sent: name, ": ",
// value, CRLF.
func headerBytes(h *fasthttp.ResponseHeader) int {
	n := 0
	for k, v := range h.All() {
		n += len(k) + 2 + len(v) + 2
	}
	return n
}

// itemNames are the names of a RateLimit or RateLimit-Policy field's items.
func itemNames(field string) []string {
	var out []string
	for item := range strings.SplitSeq(field, ", ") {
		name, _, _ := strings.Cut(item, ";")
		out = append(out, strings.Trim(name, `"`))
	}
	return out
}

// expectListed is listed's choice by brute force: sort every rule by
// (denying first, least remaining fraction, position), keep the first
// maxRateLimitItems, and put them back in position order.
func expectListed(rules []meter.Applied) []string {
	idx := make([]int, len(rules))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := &rules[i], &rules[j]
		if a.Denied != b.Denied {
			if a.Denied {
				return -1
			}
			return 1
		}
		fa := float64(a.Status.Remaining) / float64(a.Limit.Capacity)
		fb := float64(b.Status.Remaining) / float64(b.Limit.Capacity)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return i - j
	})
	idx = idx[:min(len(idx), maxRateLimitItems)]
	slices.Sort(idx)
	var out []string
	for _, i := range idx {
		out = append(out, rules[i].Rule.Name)
	}
	return out
}

// With a thousand applied rules, a response's rate-limit headers stay under
// 2 KB: the RateLimit fields list the maxRateLimitItems tightest rules (the
// same choice as a brute-force sort), both fields name the same rules, and
// the OpenAI and Anthropic headers keep one trio per kind.
func TestRateLimitHeadersBoundedWithManyRules(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 6))
	for round := range 50 {
		rules := manyApplied(r, 1000)
		for _, f := range []Flavor{FlavorOpenAI, FlavorAnthropic} {
			var h fasthttp.ResponseHeader
			h.DisableNormalizing()
			setLimitHeaders(&h, f, rules, nil)
			if n := headerBytes(&h); n >= 2048 {
				t.Fatalf("round %d, %v: %d bytes of headers, want < 2048", round, f, n)
			}
			want := expectListed(rules)
			pol, rl := itemNames(string(h.Peek("RateLimit-Policy"))), itemNames(string(h.Peek("RateLimit")))
			if !slices.Equal(pol, want) || !slices.Equal(rl, want) {
				t.Fatalf("round %d, %v: RateLimit-Policy lists %v, RateLimit %v; want the tightest %v", round, f, pol, rl, want)
			}
		}
	}
}

// A few rules are all listed, in their order, as before the bound.
func TestRateLimitHeadersListFewRulesAll(t *testing.T) {
	rules := manyApplied(rand.New(rand.NewPCG(1, 2)), maxRateLimitItems)
	var h fasthttp.ResponseHeader
	h.DisableNormalizing() // as on every answer (setField)
	setLimitHeaders(&h, FlavorOpenAI, rules, nil)
	want := []string{"l0000", "l0001", "l0002", "l0003"}
	if got := itemNames(string(h.Peek("RateLimit"))); !slices.Equal(got, want) {
		t.Errorf("RateLimit lists %v, want %v", got, want)
	}
}

// A 429 under a thousand rules lists the denying rule in its RateLimit
// fields even when it is not among the tightest, names it in
// x-llmguard-limit, and keeps its headers under 2 KB.
func TestDeniedResponseListsTheDenyingRule(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		rules := manyApplied(r, 1000)
		deny := r.IntN(len(rules))
		rules[deny].Status.Remaining = rules[deny].Limit.Capacity // full, so never among the tightest by itself
		rules[deny].Reserved = rules[deny].Limit.Capacity + 1
		for _, f := range []Flavor{FlavorOpenAI, FlavorAnthropic} {
			var ctx fasthttp.RequestCtx
			ctx.Response.Header.DisableNormalizing()
			taken := slices.Clone(rules)
			taken[deny].Denied = true // as admission marks the denying rule
			denied(&ctx, f, taken, nil, deny, denial{tooLarge: true}).write(&ctx, f)
			name := rules[deny].Rule.Name
			if got := string(ctx.Response.Header.Peek("x-llmguard-limit")); got != name {
				t.Fatalf("round %d: x-llmguard-limit %q, want %q", round, got, name)
			}
			for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
				items := itemNames(string(ctx.Response.Header.Peek(field)))
				if !slices.Contains(items, name) || len(items) != maxRateLimitItems {
					t.Fatalf("round %d, %v: %s lists %v, want %d items including the denying %s", round, f, field, items, maxRateLimitItems, name)
				}
			}
			if n := headerBytes(&ctx.Response.Header); n >= 2048 {
				t.Fatalf("round %d, %v: %d bytes of headers on the 429, want < 2048", round, f, n)
			}
		}
	}
}

// A denial by this node's fallback share, while the store is unavailable,
// says so after the configured limit's figures (trial3: "limit 1000,
// remaining 7" after some 500 tokens, nothing said of the outage); a
// denial by the store itself does not.
func TestDeniedByFallbackSaysSo(t *testing.T) {
	rules := manyApplied(rand.New(rand.NewPCG(5, 6)), 1)
	rules[0].Denied = true
	const note = "limit store is unavailable: until it answers again, each llmguard node enforces its own share of this limit"
	for _, fallback := range []bool{false, true} {
		for _, f := range []Flavor{FlavorOpenAI, FlavorAnthropic} {
			var ctx fasthttp.RequestCtx
			e := denied(&ctx, f, rules, nil, 0, denial{retry: 5 * time.Second, fallback: fallback})
			if got := strings.Contains(e.message, note); got != fallback {
				t.Errorf("fallback %v, %v: message %q; want the outage named: %v", fallback, f, e.message, fallback)
			}
		}
	}
}
