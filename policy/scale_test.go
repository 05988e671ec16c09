package policy_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/scaletest"
	"github.com/llmguard/llmguard/policy"
)

// bruteMatch is what Match returned before the index: every rule, in
// order, whose Matches is true.
func bruteMatch(p *policy.Policy, pr policy.Principal, model, reqPath string) []*policy.Rule {
	var out []*policy.Rule
	rules := p.Rules()
	for i := range rules {
		if rules[i].Matches(pr, model, reqPath) {
			out = append(out, &rules[i])
		}
	}
	return out
}

// Small vocabularies, so that random rules and requests meet often. Globs
// cover literals, prefixes, a leading *, ?, classes and escapes, and
// Ollama's spellings of one model (spec.CanonModel).
var (
	vUsers   = []string{"", "u0", "u1", "u2", "u3", "u4"}
	vTenants = []string{"", "t0", "t1", "t2", "acme"}
	vPlans   = []string{"", "free", "pro", "enterprise"}
	vModels  = []string{"", "gpt-4o", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-5", "claude-sonnet-4-5", "o3", "*x", "a[b",
		"llama3.1", "library/llama3.1:latest", "LLAMA3.1:latest"}
	vModelG = []string{"gpt-4o", "gpt-4o*", "gpt-*", "*", "*mini*", "gpt-?", "claude-*-4-5", "[go]*", `\*x`, "o3", "gpt-4o-mini", "", "a[[]b",
		"llama3.1:latest", "library/*", "registry.ollama.ai/library/llama3.1", "*:latest", "llama3.1:lat*"}
	vPaths  = []string{"", "/v1/chat/completions", "/v1/embeddings", "/v1/messages", "/v1/models/x"}
	vPathG  = []string{"/v1/chat/completions", "/v1/*", "/v1/*/*", "*", "/v1/m*", "/v?/embeddings", "/v1/messages"}
	vScopes = []string{"key", "user", "tenant", "global"}
)

// pick returns 0 to 3 random entries of vocab, possibly repeated.
func pick(r *rand.Rand, vocab []string) []string {
	var out []string
	for range r.IntN(4) {
		out = append(out, vocab[r.IntN(len(vocab))])
	}
	return out
}

// baseConfig is a valid config without limits, its defaults filled.
func baseConfig(t testing.TB) *config.Config {
	c, err := config.Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// randomPolicy compiles n random limits, each with a random subset of
// matchers (most rules have some, a few have none).
func randomPolicy(t testing.TB, r *rand.Rand, n int) *policy.Policy {
	c := baseConfig(t)
	for i := range n {
		l := config.Limit{Name: fmt.Sprintf("l%d", i), Scope: vScopes[r.IntN(len(vScopes))], Unit: "requests",
			Rate: 1, Burst: 1, Per: config.Duration(time.Second), OnFailure: "open"}
		if r.IntN(2) == 0 {
			l.Users = pick(r, vUsers)
		}
		if r.IntN(2) == 0 {
			l.Tenants = pick(r, vTenants)
		}
		if r.IntN(2) == 0 {
			l.Plans = pick(r, vPlans)
		}
		if r.IntN(2) == 0 {
			l.Models = pick(r, vModelG)
		}
		if r.IntN(3) == 0 {
			l.Paths = pick(r, vPathG)
		}
		c.Limits = append(c.Limits, l)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The indexed Match returns exactly what a scan of every rule returns (the
// same rules, in the same order) over random configs and every request
// their vocabularies make.
func TestMatchIndexAgreesWithBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 6))
	checked, matched := 0, 0
	for cfg := range 200 {
		p := randomPolicy(t, r, 1+r.IntN(40))
		for range 200 {
			pr := policy.Principal{KeyID: "k", User: vUsers[r.IntN(len(vUsers))], Tenant: vTenants[r.IntN(len(vTenants))],
				Plan: vPlans[r.IntN(len(vPlans))]}
			model, reqPath := vModels[r.IntN(len(vModels))], vPaths[r.IntN(len(vPaths))]
			got := p.Match(nil, pr, model, reqPath)
			want := bruteMatch(p, pr, model, reqPath)
			if !slices.Equal(got, want) {
				t.Fatalf("config %d, request %+v model %q path %q: Match gave %v, a scan of every rule %v",
					cfg, pr, model, reqPath, names(got), names(want))
			}
			checked++
			matched += len(got)
		}
	}
	if matched < checked { // the vocabularies must make matches common
		t.Fatalf("only %d matches over %d requests: the test exercises too little", matched, checked)
	}
}

// Match appends to the caller's buffer and keeps what it held.
func TestMatchAppendsToDst(t *testing.T) {
	p := randomPolicy(t, rand.New(rand.NewPCG(1, 2)), 30)
	pr := policy.Principal{User: "u1", Tenant: "t1", Plan: "pro"}
	sentinel := &policy.Rule{Name: "kept"}
	got := p.Match([]*policy.Rule{sentinel}, pr, "gpt-4o", "/v1/chat/completions")
	if got[0] != sentinel || !slices.Equal(got[1:], bruteMatch(p, pr, "gpt-4o", "/v1/chat/completions")) {
		t.Fatalf("Match did not append: %v", names(got))
	}
}

func names(rules []*policy.Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Name
	}
	return out
}

// applicablePolicy has n limits of which exactly three apply to
// applicableRequest: one for everyone, one for its tenant and one for its
// user with its model. The other n-3 name other users, tenants, plans or
// models, as a config of many customers does.
func applicablePolicy(t testing.TB, n int) *policy.Policy {
	c := baseConfig(t)
	add := func(l config.Limit) {
		l.Name, l.Unit, l.Rate, l.Burst, l.Per, l.OnFailure = fmt.Sprintf("l%d", len(c.Limits)), "tokens", 1000, 1000, config.Duration(time.Minute), "open"
		if l.Scope == "" {
			l.Scope = "user"
		}
		c.Limits = append(c.Limits, l)
	}
	add(config.Limit{Scope: "global"})
	add(config.Limit{Scope: "tenant", Tenants: []string{"acme"}})
	add(config.Limit{Users: []string{"alice"}, Models: []string{"gpt-4o*"}})
	for i := 3; i < n; i++ {
		switch i % 4 {
		case 0:
			add(config.Limit{Users: []string{fmt.Sprintf("user-%d", i)}})
		case 1:
			add(config.Limit{Scope: "tenant", Tenants: []string{fmt.Sprintf("tenant-%d", i)}})
		case 2:
			add(config.Limit{Plans: []string{fmt.Sprintf("plan-%d", i)}, Models: []string{"gpt-4o*"}})
		case 3:
			add(config.Limit{Scope: "global", Models: []string{fmt.Sprintf("family-%d-*", i)}})
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var applicableRequest = policy.Principal{KeyID: "0123456789abcdef", User: "alice", Tenant: "acme", Plan: "pro"}

const applicableModel, applicablePath = "gpt-4o-mini", "/v1/chat/completions"

// Matching costs what the applicable rules cost, not what all rules cost:
// with 1,000 limits of which 3 apply, the index gives Match as many rules
// to check as with 10 limits of which the same 3 apply: the 3 themselves.
// Counted, not timed (a timed ratio of the two failed at 10.1x on a loaded
// 2-core machine); BenchmarkMatch shows the times.
func TestMatchCostFollowsApplicableRules(t *testing.T) {
	small, large := applicablePolicy(t, 10), applicablePolicy(t, 1000)
	for _, p := range []*policy.Policy{small, large} {
		if got := p.Match(nil, applicableRequest, applicableModel, applicablePath); len(got) != 3 {
			t.Fatalf("%d limits: %d apply (%v), want 3", len(p.Rules()), len(got), names(got))
		}
		if c := p.Candidates(applicableRequest, applicableModel, applicablePath); c != 3 {
			t.Errorf("%d limits, 3 applicable: the index gives Match %d rules to check, want 3", len(p.Rules()), c)
		}
	}
}

// BenchmarkMatch measures Match with 10 and 1,000 limits, 3 applicable in
// both: the two figures should be close.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 1000} {
		p := applicablePolicy(b, n)
		b.Run(fmt.Sprintf("limits=%d/applicable=3", n), func(b *testing.B) {
			var buf [8]*policy.Rule
			b.ReportAllocs()
			for b.Loop() {
				buf := p.Match(buf[:0], applicableRequest, applicableModel, applicablePath)
				if len(buf) != 3 {
					b.Fatal(len(buf))
				}
			}
		})
	}
}

// BenchmarkCompile10kKeys1kLimits compiles the policy of a config of 10,000
// virtual keys and 1,000 limits (parsed once, outside the loop).
func BenchmarkCompile10kKeys1kLimits(b *testing.B) {
	c, err := config.Parse(scaletest.Config(10000, 1000, "http://127.0.0.1:1"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Compile(c); err != nil {
			b.Fatal(err)
		}
	}
}
