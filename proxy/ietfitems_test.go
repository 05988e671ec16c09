package proxy

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
)

// ietfPolicy is a policy of n rules of every unit, named as manyApplied's,
// some of them with a name that needs quoting.
func ietfPolicy(t testing.TB, n int) *policy.Policy {
	t.Helper()
	units := []string{"requests", "tokens", "input_tokens", "output_tokens", "usd"}
	var b strings.Builder
	b.WriteString("upstreams: [{name: mock, flavor: openai, base_url: \"http://127.0.0.1:4000\", no_key: true}]\nkeys: [{key: sk-x, user: alice, tenant: acme}]\nlimits:\n")
	for i := range n {
		name := fmt.Sprintf("l%04d", i)
		if i%7 == 3 {
			name += "-é" // quoted by strconv.AppendQuote, not as it is
		}
		fmt.Fprintf(&b, "  - {name: %q, scope: user, unit: %s, rate: %d, per: 1m}\n", name, units[i%len(units)], 1000+i)
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestIETFItemsWriteTheSameFields: with the cache, the RateLimit fields
// are byte for byte what they are without it, request after request, as
// limits change (capacity, quota periods), for rules of the cache's
// policy, of another policy, and copies of its rules; an item is reused
// only for the same rule and limit.
func TestIETFItemsWriteTheSameFields(t *testing.T) {
	pol, other := ietfPolicy(t, 12), ietfPolicy(t, 12)
	items := newIETFItems(pol)
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for round := range 400 {
		n := 1 + r.IntN(6)
		rules := make([]meter.Applied, n)
		for i := range rules {
			src := pol
			if r.IntN(5) == 0 {
				src = other
			}
			rule := &src.Rules()[r.IntN(len(src.Rules()))]
			if r.IntN(9) == 0 {
				copied := *rule
				rule = &copied
			}
			capacity := int64(1000 + r.IntN(3)) // few values: the cache both hits and misses
			limit := bucket.Limit{Capacity: capacity, Rate: capacity, Per: time.Minute}
			if r.IntN(4) == 0 {
				from := start.AddDate(0, r.IntN(2), 0)
				limit = bucket.Quota(capacity, from, from.AddDate(0, 1, 0))
			}
			rules[i] = meter.Applied{Rule: rule, Key: "k", Limit: limit,
				Status: bucket.Status{Remaining: capacity - r.Int64N(capacity), Reset: time.Duration(r.IntN(90)) * time.Second}}
		}
		flavor := []Flavor{FlavorOpenAI, FlavorAnthropic, FlavorAzure}[round%3]
		var cached, plain fasthttp.ResponseHeader
		cached.DisableNormalizing()
		plain.DisableNormalizing()
		setLimitHeaders(&cached, flavor, rules, items)
		setLimitHeaders(&plain, flavor, rules, nil)
		for _, f := range []string{"RateLimit-Policy", "RateLimit"} {
			if got, want := string(cached.Peek(f)), string(plain.Peek(f)); got != want {
				t.Fatalf("round %d, %s: %q with the cache, %q without", round, f, got, want)
			}
		}
		// Every field, the flavor's own too (their limits come from the
		// cache, a remaining written twice is copied): as written without
		// the cache, and each number the rule's own.
		// The Date fields too: each is read from the clock when written,
		// and a second may turn between the two (a flake under load).
		got := serverDate.ReplaceAllString(anthropicReset.ReplaceAllString(cached.String(), "${1}<instant>"), "${1}<date>")
		want := serverDate.ReplaceAllString(anthropicReset.ReplaceAllString(plain.String(), "${1}<instant>"), "${1}<date>")
		if got != want {
			t.Fatalf("round %d (flavor %d): with the cache:\n%s", round, flavor, firstDiff(got, want))
		}
		if flavor == FlavorOpenAI {
			if i := tightestOf(rules, policy.UnitRequests); i >= 0 {
				a := rules[i]
				if got, want := string(plain.Peek("x-ratelimit-limit-requests")), fmt.Sprint(a.Limit.Capacity); got != want {
					t.Fatalf("round %d: x-ratelimit-limit-requests %s, want %s", round, got, want)
				}
				if got, want := string(plain.Peek("x-ratelimit-remaining-requests")), fmt.Sprint(max(a.Status.Remaining, 0)); got != want {
					t.Fatalf("round %d: x-ratelimit-remaining-requests %s, want %s", round, got, want)
				}
			}
		}
		if len(rules) <= maxRateLimitItems {
			var items []string
			for _, a := range rules {
				items = append(items, fmt.Sprintf("%s;r=%d;t=%d", strconv.Quote(a.Rule.Name), max(a.Status.Remaining, 0), ceilSeconds(a.Status.Reset)))
			}
			if got, want := string(cached.Peek("RateLimit")), strings.Join(items, ", "); got != want {
				t.Fatalf("round %d: RateLimit %q, want %q", round, got, want)
			}
		}
	}

	a := meter.Applied{Rule: &pol.Rules()[2], Limit: bucket.Limit{Capacity: 5, Rate: 5, Per: time.Second}}
	first := items.of(&a)
	if items.of(&a) != first {
		t.Error("the same rule and limit: the item is built again")
	}
	a.Limit.Capacity = 6
	if second := items.of(&a); second == first || !strings.Contains(string(second.policy), ";q=6;") {
		t.Errorf("a changed limit reuses the old item: %q", second.policy)
	}
	copied := *a.Rule
	b := meter.Applied{Rule: &copied, Limit: a.Limit}
	if items.of(&b) != nil {
		t.Error("a rule not of the cache's policy is cached")
	}
}

// BenchmarkIETFHeaders: the RateLimit fields of three rules, with and
// without the cache.
//
//	go test -run XXX -bench IETFHeaders -benchmem ./proxy
func BenchmarkIETFHeaders(b *testing.B) {
	pol := ietfPolicy(b, 3)
	rules := make([]meter.Applied, 3)
	for i := range rules {
		rules[i] = meter.Applied{Rule: &pol.Rules()[i], Limit: bucket.Limit{Capacity: 1e9, Rate: 1e9, Per: time.Second},
			Status: bucket.Status{Remaining: 1e9 - 300, Reset: time.Millisecond}}
	}
	for _, c := range []struct {
		name  string
		items *ietfItems
	}{{"cached", newIETFItems(pol)}, {"built", nil}} {
		b.Run(c.name, func(b *testing.B) {
			var h fasthttp.ResponseHeader
			h.DisableNormalizing()
			b.ReportAllocs()
			for range b.N {
				var stack [512]byte
				fs := limitFields{buf: stack[:0]}
				fs.start(rules, c.items)
				setIETFHeaders(&fs, rules, c.items)
				fs.writeTo(&h)
			}
		})
	}
}

// TestIETFItemsConcurrent: requests of one policy write their fields
// through one cache at once, their limits changing (run it under -race).
func TestIETFItemsConcurrent(t *testing.T) {
	pol := ietfPolicy(t, 4)
	items := newIETFItems(pol)
	done := make(chan string)
	for g := range 4 {
		go func() {
			var bad string
			for i := range 300 {
				capacity := int64(1000 + (g+i)%3)
				a := []meter.Applied{{Rule: &pol.Rules()[i%4], Limit: bucket.Limit{Capacity: capacity, Rate: capacity, Per: time.Minute}}}
				var h fasthttp.ResponseHeader
				h.DisableNormalizing()
				setLimitHeaders(&h, FlavorOpenAI, a, items)
				if want := fmt.Sprintf(";q=%d;", capacity); !strings.Contains(string(h.Peek("RateLimit-Policy")), want) && bad == "" {
					bad = fmt.Sprintf("%q lacks %s", h.Peek("RateLimit-Policy"), want)
				}
			}
			done <- bad
		}()
	}
	for range 4 {
		if bad := <-done; bad != "" {
			t.Error(bad)
		}
	}
}
