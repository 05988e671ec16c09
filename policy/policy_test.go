package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

func mustConfig(t testing.TB, y string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKeyLayoutAndEscaping(t *testing.T) {
	user := Rule{Name: "user-tpm", Scope: ScopeUser}
	tenant := Rule{Name: "tenant-tpm", Scope: ScopeTenant}
	global := Rule{Name: "all-tpm", Scope: ScopeGlobal}
	key := Rule{Name: "key-rpm", Scope: ScopeKey}
	p := Principal{KeyID: "0123abcd", User: "alice", Tenant: "acme"}
	for _, tc := range []struct {
		name string
		got  string
		want string
	}{
		{"user", user.Key(p), "llmguard:{acme}:user-tpm:alice"},
		{"tenant", tenant.Key(p), "llmguard:{acme}:tenant-tpm:acme"},
		{"global", global.Key(p), "llmguard:{global}:all-tpm"},
		{"key", key.Key(p), "llmguard:{acme}:key-rpm:0123abcd"},
		{"escaped tenant", user.Key(Principal{User: "a", Tenant: "ev}il:{x"}), "llmguard:{ev%7Dil%3A%7Bx}:user-tpm:a"},
		{"escaped user", user.Key(Principal{User: "a:b%", Tenant: "t"}), "llmguard:{t}:user-tpm:a%3Ab%25"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// No pair of distinct (tenant, user) ids maps to one key.
	forge := [][2]string{{"acme", "x:y"}, {"acme:x", "y"}, {"acme}:user-tpm:x", "y"}, {"a%3Ab", "c"}, {"a:b", "c"}}
	seen := map[string][2]string{}
	for _, f := range forge {
		k := user.Key(Principal{Tenant: f[0], User: f[1]})
		if prev, dup := seen[k]; dup {
			t.Errorf("%v and %v share key %q", prev, f, k)
		}
		seen[k] = f
	}
}

func TestMicroUSDIsExactAndRoundsUp(t *testing.T) {
	mini := PriceFromUSDPerMTok(0.15, 0.075, 0.60)
	for _, tc := range []struct {
		name string
		t    spec.Usage
		want int64
	}{
		{"1M input tokens cost $0.15", spec.Usage{InputTokens: 1_000_000}, 150_000},
		{"one input token rounds up to 1 µUSD", spec.Usage{InputTokens: 1}, 1},
		{"cached tokens at the cached price", spec.Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000}, 75_000},
		{"mixed", spec.Usage{InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 500}, 90 + 30 + 300},
		{"7 tokens: 7×0.15 = 1.05 → 2", spec.Usage{InputTokens: 7}, 2},
		{"negatives count as zero", spec.Usage{InputTokens: -5, OutputTokens: -1}, 0},
		{"cached above input is clamped", spec.Usage{InputTokens: 10, CachedInputTokens: 20}, 1},
	} {
		if got := mini.MicroUSD(tc.t); got != tc.want {
			t.Errorf("%s: %d µUSD, want %d", tc.name, got, tc.want)
		}
	}
	huge := PriceFromUSDPerMTok(1e6, 0, 1e6)
	if got := huge.MicroUSD(spec.Usage{InputTokens: math.MaxInt64 / 2}); got != math.MaxInt64 {
		t.Errorf("overflow not saturated: %d", got)
	}
}

func TestCompileMatchAndUnits(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
keys:
  - {key: sk-a, user: alice, tenant: acme, plan: free}
  - {key_sha256: "`+sha("sk-b")+`", user: bob, tenant: beta, plan: pro}
models:
  gpt-4o-mini: {input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
  gpt-4o: {input_usd_per_mtok: 2.5, output_usd_per_mtok: 10}
limits:
  - {name: global-rps, scope: global, unit: requests, rate: 0.5, per: 1s, burst: 2}
  - {name: free-tpm, scope: user, unit: tokens, rate: 1000, per: 1m, plans: [free]}
  - {name: mini-only, scope: tenant, unit: usd, rate: 1.5, per: 1h, models: ["gpt-4o-mini*"]}
  - {name: chat-path, scope: key, unit: output_tokens, rate: 10, per: 1s, paths: ["/v1/chat/*"]}
`)
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	alice, ok := p.Identify("sk-a")
	if !ok || alice.User != "alice" || alice.KeyID != sha("sk-a")[:16] {
		t.Fatalf("alice = %+v, %v", alice, ok)
	}
	if bob, ok := p.Identify("sk-b"); !ok || bob.Tenant != "beta" {
		t.Fatalf("bob by sha256 = %+v, %v", bob, ok)
	}
	if _, ok := p.Identify("sk-unknown"); ok {
		t.Fatal("unknown key identified without pass-through")
	}

	names := func(rs []*Rule) (out []string) {
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	got := names(p.Match(nil, alice, "gpt-4o-mini-2024-07-18", "/v1/chat/completions"))
	want := []string{"chat-path", "free-tpm", "mini-only", "global-rps"} // narrowest scope first
	if len(got) != len(want) {
		t.Fatalf("matched %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("matched %v, want %v", got, want)
		}
	}
	if got := names(p.Match(nil, alice, "gpt-4o", "/v1/embeddings")); len(got) != 2 {
		t.Errorf("gpt-4o on /v1/embeddings matched %v, want free-tpm and global-rps", got)
	}

	rules := p.Rules()
	g := rules[len(rules)-1]
	if g.Limit.Rate != 500 || g.Limit.Per != 1000*time.Second || g.Limit.Capacity != 2 {
		t.Errorf("fractional rate: %+v, want 500 per 1000s, capacity 2", g.Limit)
	}
	var usd *Rule
	for i := range rules {
		if rules[i].Name == "mini-only" {
			usd = &rules[i]
		}
	}
	if usd.Limit.Capacity != 1_500_000 || usd.Limit.Rate != 1_500_000 {
		t.Errorf("usd limit %+v, want 1.5 dollars = 1,500,000 µUSD", usd.Limit)
	}
	tok := spec.Usage{InputTokens: 1000, OutputTokens: 1000}
	price := func(model string) Price {
		q := p.Quote(model, "")
		if !q.Priced {
			t.Fatalf("%s: not priced", model)
		}
		return q.Price
	}
	if u := usd.Units(tok, price("gpt-4o-mini")); u != 150+600 {
		t.Errorf("usd units = %d", u)
	}
	// A dated snapshot takes the prices of the model it is a snapshot of.
	if u := usd.Units(tok, price("gpt-4o-mini-2024-07-18")); u != 150+600 {
		t.Errorf("dated snapshot usd units = %d, want gpt-4o-mini's (750)", u)
	}
	// An unlisted model has no price: no guess (the highest price of the
	// table was still 24× too low for o1-pro), and a usd limit refuses it.
	if q := p.Quote("mystery-model", ""); q.Priced || q.Label != "" || q.Missing != `models."mystery-model"` {
		t.Errorf("unlisted model quoted %+v, want unpriced with its config key", q)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestCompileRefusesUnusableBuckets(t *testing.T) {
	c := mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
limits:
  - {name: ok, scope: user, unit: requests, rate: 1, per: 1h}
  - {name: tiny, scope: user, unit: requests, rate: 0.0004, per: 1s, burst: 1}
  - {name: long, scope: user, unit: requests, rate: 1.5, per: 2500000h}
`)
	_, err := Compile(c)
	var ce *config.Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 ||
		!strings.HasPrefix(ce.Problems[0], "limits[1]:") || !strings.HasPrefix(ce.Problems[1], "limits[2]:") {
		t.Fatalf("err = %v, want limits[1] and limits[2] refused", err)
	}
}
