package proxy

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/meter"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
)

var updateLimitHeaders = flag.Bool("update-limit-headers", false, "rewrite testdata/limit_headers.golden from setLimitHeaders")

// limitHeaderCase is one decision whose limit headers the golden file
// holds: the rules applied, with their limits and statuses, in a flavor.
type limitHeaderCase struct {
	name   string
	flavor Flavor
	// upstream are fields the upstream's answer already carries, some of
	// them of the names setLimitHeaders writes (which it replaces).
	upstream [][2]string
	rules    []meter.Applied
}

// limitHeaderCases are decisions of every flavor: one rule and many
// (more than maxRateLimitItems), every unit, a bucket in debt, a denial,
// a quota, a window counter, a name that needs quoting.
func limitHeaderCases(t testing.TB) (*ietfItems, []limitHeaderCase) {
	pol := ietfPolicy(t, 14) // units cycle requests, tokens, input_tokens, output_tokens, usd; rule 3 and 10 quoted
	rule := func(i int) *meter.Applied {
		r := &pol.Rules()[i]
		return &meter.Applied{Rule: r, Limit: bucket.Limit{Capacity: int64(1000 + i), Rate: int64(1000 + i), Per: time.Minute}}
	}
	with := func(a *meter.Applied, remaining int64, reset time.Duration) meter.Applied {
		a.Status = bucket.Status{Remaining: remaining, Reset: reset}
		return *a
	}
	quota := rule(4)
	quota.Limit = bucket.Limit{Capacity: 5_000_000, WindowStart: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), WindowEnd: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	window := rule(6)
	window.Limit = bucket.Limit{Capacity: 600, Per: time.Hour, Algorithm: bucket.SlidingWindow}
	denied := with(rule(1), -250, 3*time.Minute+1)
	denied.Denied = true
	var many []meter.Applied
	for i := range 14 {
		many = append(many, with(rule(i), int64(1000+i-(i*37)%300), time.Duration(i)*time.Second+time.Duration(i)*time.Millisecond))
	}
	many[9].Denied = true
	many[9].Status.Remaining = 0
	upstream := [][2]string{{"Content-Type", "application/json"}, {"x-ratelimit-limit-tokens", "7"}, {"RateLimit", "upstream"},
		{"anthropic-ratelimit-tokens-limit", "7"}, {"x-request-id", "req_1"}}
	var cases []limitHeaderCase
	for _, f := range []Flavor{spec.FlavorOpenAI, spec.FlavorAnthropic, spec.FlavorAzure} {
		cases = append(cases,
			limitHeaderCase{name: "one requests rule", flavor: f, rules: []meter.Applied{with(rule(0), 999, 60*time.Millisecond)}},
			limitHeaderCase{name: "every unit", flavor: f, upstream: upstream, rules: []meter.Applied{
				with(rule(0), 5, 1500*time.Millisecond), with(rule(1), 900, 90*time.Second), with(rule(2), 0, 0),
				with(rule(3), 1003, 0), with(quota, 4_200_000, 20*24*time.Hour+time.Nanosecond)}},
			limitHeaderCase{name: "denied in debt", flavor: f, upstream: upstream, rules: []meter.Applied{
				with(rule(10), 40, time.Second), denied, with(window, 12, 59*time.Minute)}},
			limitHeaderCase{name: "many rules", flavor: f, upstream: upstream, rules: many},
		)
	}
	return newIETFItems(pol), cases
}

// anthropicReset matches the instant of an anthropic-ratelimit-*-reset
// field, which depends on the clock; the golden file holds it masked.
var anthropicReset = regexp.MustCompile(`(anthropic-ratelimit-[a-z-]+-reset: )(\S+)`)

// serverDate matches the Date field fasthttp writes from the clock.
var serverDate = regexp.MustCompile(`(?m)^(Date: )(.*)\r$`)

// TestLimitHeadersGolden: the limit headers of every flavor, for decisions
// of one rule and many, are byte for byte those recorded in
// testdata/limit_headers.golden (recorded from the code before the header
// path was made lean; -update-limit-headers rewrites it). An Anthropic
// reset instant, read from the clock, is checked to be the status's reset
// from a time within the call, rounded up to the next whole second, and
// masked.
func TestLimitHeadersGolden(t *testing.T) {
	var out bytes.Buffer
	cache, cases := limitHeaderCases(t)
	for _, tc := range cases {
		var first string
		for _, items := range []*ietfItems{nil, cache, cache} { // built in place, cached, from the cache
			var h fasthttp.ResponseHeader
			h.DisableNormalizing()
			for _, kv := range tc.upstream {
				h.Add(kv[0], kv[1])
			}
			before := time.Now()
			setLimitHeaders(&h, tc.flavor, tc.rules, items)
			after := time.Now()
			text := h.String()
			for _, m := range anthropicReset.FindAllStringSubmatch(text, -1) {
				at, err := time.Parse(time.RFC3339, m[2])
				if err != nil {
					t.Fatalf("%s: %s: %v", tc.name, m[0], err)
				}
				if at.Before(before.Truncate(time.Second)) || at.After(after.Add(31*24*time.Hour).Truncate(time.Second).Add(time.Second)) {
					t.Errorf("%s: %s out of range", tc.name, m[0])
				}
			}
			text = anthropicReset.ReplaceAllString(text, "${1}<instant>")
			text = serverDate.ReplaceAllString(text, "${1}<date>")
			if items == nil {
				first = text
				fmt.Fprintf(&out, "=== %s (flavor %d)\n%s", tc.name, tc.flavor, strings.ReplaceAll(text, "\r\n", "\n"))
			} else if text != first {
				t.Errorf("%s (flavor %d): with the cache:\n%s", tc.name, tc.flavor, firstDiff(text, first))
			}
		}
	}
	path := filepath.Join("testdata", "limit_headers.golden")
	if *updateLimitHeaders {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("limit headers differ from %s:\n%s", path, firstDiff(got, string(want)))
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got  %q\n want %q", i+1, gl, wl)
		}
	}
	return ""
}

// TestTightestOfIsTightest: tightestOf picks, for every unit, the rule
// tightest picks with a match of that unit alone (the earliest among
// equals), over random rules of few distinct remainders.
func TestTightestOfIsTightest(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	units := []policy.Unit{policy.UnitRequests, policy.UnitTokens, policy.UnitInputTokens, policy.UnitOutputTokens, policy.UnitUSD, policy.UnitConcurrent}
	for range 5000 {
		rules := make([]meter.Applied, r.IntN(8))
		for i := range rules {
			rules[i] = meter.Applied{Rule: &policy.Rule{Unit: units[r.IntN(len(units))]}, Status: bucket.Status{Remaining: int64(r.IntN(4) - 1)}}
		}
		for _, u := range units {
			if got, want := tightestOf(rules, u), tightest(rules, func(v policy.Unit) bool { return v == u }); got != want {
				t.Fatalf("unit %v over %d rules: %d, want %d", u, len(rules), got, want)
			}
		}
	}
}

// FuzzTightestOf: tightestOf agrees with tightest on any rules (two bytes
// each: a unit and a remainder).
func FuzzTightestOf(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 0, 3, 5, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		units := []policy.Unit{policy.UnitRequests, policy.UnitTokens, policy.UnitInputTokens, policy.UnitOutputTokens, policy.UnitUSD, policy.UnitConcurrent}
		var rules []meter.Applied
		for i := 0; i+1 < len(b) && len(rules) < 64; i += 2 {
			rules = append(rules, meter.Applied{Rule: &policy.Rule{Unit: units[int(b[i])%len(units)]}, Status: bucket.Status{Remaining: int64(int8(b[i+1]))}})
		}
		for _, u := range units {
			if got, want := tightestOf(rules, u), tightest(rules, func(v policy.Unit) bool { return v == u }); got != want {
				t.Fatalf("unit %v: %d, want %d", u, got, want)
			}
		}
	})
}
