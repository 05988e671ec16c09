package app

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// checkOf parses a config and runs Check on it with env as the
// environment.
func checkOf(t *testing.T, yaml string, env map[string]string) []Finding {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	fs, err := CheckConfig(cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// found returns the findings at field.
func found(fs []Finding, field string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Field == field {
			out = append(out, f)
		}
	}
	return out
}

// An upstream that would get no credential refuses the start: an empty
// api_key_env, or one naming an unset or empty variable; no_key: true
// and pass-through-only configs need none.
func TestCheckUpstreamKeys(t *testing.T) {
	fs := checkOf(t, `
upstreams:
  - {name: a, flavor: openai, base_url: "http://x", api_key_env: KEY_SET}
  - {name: b, flavor: openai, base_url: "http://x", path_prefix: /b, api_key_env: KEY_UNSET}
  - {name: c, flavor: openai, base_url: "http://x", path_prefix: /c, api_key_env: KEY_EMPTY}
  - {name: d, flavor: anthropic, base_url: "http://x"}
  - {name: e, flavor: openai, base_url: "http://x", path_prefix: /e, no_key: true}
keys: [{key: sk-a, tenant: acme}]
`, map[string]string{"KEY_SET": "sk-up", "KEY_EMPTY": ""})
	for _, tc := range []struct {
		field string
		fatal bool
		says  string
	}{
		{"upstreams[0].api_key_env", false, ""},
		{"upstreams[1].api_key_env", true, "KEY_UNSET is not set"},
		{"upstreams[2].api_key_env", true, "KEY_EMPTY is not set (or empty)"},
		{"upstreams[3].api_key_env", true, "no api_key_env"},
		{"upstreams[4].api_key_env", false, ""},
	} {
		got := found(fs, tc.field)
		if !tc.fatal {
			if len(got) != 0 {
				t.Errorf("%s: %v, want nothing", tc.field, got)
			}
			continue
		}
		if len(got) != 1 || !got[0].Fatal || !strings.Contains(got[0].Message, tc.says) || !strings.Contains(got[0].Message, "no_key: true") {
			t.Errorf("%s: %v, want one fatal finding saying %q and naming no_key", tc.field, got, tc.says)
		}
	}
	if fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x"}]
identity: {pass_through: true}
`, nil); len(Fatal(fs)) != 0 {
		t.Errorf("pass-through only: %v, want no fatal finding (callers bring their keys)", fs)
	}
	if _, err := config.Parse([]byte(`upstreams: [{name: a, flavor: openai, base_url: "http://x", api_key_env: K, no_key: true}]`)); err == nil ||
		!strings.Contains(err.Error(), "upstreams[0].no_key") {
		t.Errorf("api_key_env with no_key: %v, want refused", err)
	}
}

// New refuses to start on a missing key, naming the field; it starts once
// the variable is set.
func TestStartRefusesAnUpstreamWithoutItsKey(t *testing.T) {
	yaml := `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{name: openai, flavor: openai, base_url: "http://127.0.0.1:1", api_key_env: LLMGUARD_TEST_UNSET_KEY}]
keys: [{key: sk-a, tenant: acme}]
`
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("LLMGUARD_TEST_UNSET_KEY", "")
	if _, err := New(cfg, quiet); err == nil || !strings.Contains(err.Error(), "upstreams[0].api_key_env: LLMGUARD_TEST_UNSET_KEY is not set") {
		t.Fatalf("New = %v, want a refusal naming upstreams[0].api_key_env", err)
	}
	t.Setenv("LLMGUARD_TEST_UNSET_KEY", "sk-upstream")
	a, err := New(cfg, quiet)
	if err != nil {
		t.Fatalf("with the key set: %v", err)
	}
	a.Close()
}

// A limit below some model's default request cost is reported, naming the
// limit, the dearest model and the cost; one above every model's is not.
func TestCheckLimitBelowDefaultCost(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: free}]
default_max_output_tokens: 4096
models:
  gpt-4o-mini: {default_max_output_tokens: 256}
limits:
  - {name: tiny-tokens, scope: user, unit: tokens, rate: 1000, per: 1h}
  - {name: mini-tokens, scope: user, unit: tokens, rate: 1000, per: 1h, models: ["gpt-4o-mini"]}
  - {name: pro-dollars, scope: user, unit: usd, quota: 1, period: day, models: ["o1-pro*", "gpt-4o-mini"]}
  - {name: output-only, scope: user, unit: output_tokens, rate: 100, per: 1m, models: ["text-embedding-*"]}
  - {name: rpm, scope: user, unit: requests, rate: 1, per: 1m}
  - {name: next-tokens, scope: user, unit: tokens, rate: 1000, per: 1h, shadow: true}
  - {name: capped-tokens, scope: user, unit: tokens, rate: 1000, per: 1h, cap_output: true}
  - {name: capped-too-small, scope: user, unit: tokens, rate: 200, per: 1h, cap_output: true}
`, nil)
	if got := found(fs, "limits[5]"); len(got) != 0 {
		t.Errorf("limits[5]: %v, want nothing for a shadow limit (it never refuses)", got)
	}
	if got := found(fs, "limits[6]"); len(got) != 0 {
		t.Errorf("limits[6]: %v, want nothing: cap_output lowers the 4096 reserved to 256, which fits", got)
	}
	if got := found(fs, "limits[7]"); len(got) != 1 {
		t.Errorf("limits[7]: %v, want a warning: not even cap_output_min (256) fits 200 tokens", got)
	}
	tiny := found(fs, "limits[0]")
	if len(tiny) != 1 || tiny[0].Fatal || !strings.Contains(tiny[0].Message, "tiny-tokens holds 1000 tokens") ||
		!strings.Contains(tiny[0].Message, "default_max_output_tokens, 4096 output tokens") || !strings.Contains(tiny[0].Message, "models it applies to, such as") {
		t.Errorf("limits[0]: %v, want a warning naming tiny-tokens, the 4096-token reservation and the models", tiny)
	}
	if got := found(fs, "limits[1]"); len(got) != 0 {
		t.Errorf("limits[1]: %v, want nothing (gpt-4o-mini reserves 256)", got)
	}
	pro := found(fs, "limits[2]")
	if len(pro) != 1 || !strings.Contains(pro[0].Message, "(o1-pro: 7 input tokens") || !strings.Contains(pro[0].Message, "$1.000000") ||
		!strings.Contains(pro[0].Message, "$2.45") {
		t.Errorf("limits[2]: %v, want o1-pro's $2.45… default cost against $1", pro)
	}
	if got := found(fs, "limits[3]"); len(got) != 0 {
		t.Errorf("limits[3]: %v, want nothing (embeddings reserve no output)", got)
	}
	if got := found(fs, "limits[4]"); len(got) != 0 {
		t.Errorf("limits[4]: %v, want nothing for a requests limit", got)
	}
}

// The warning of a limit below the default request cost names the
// setting that makes the reservation and the largest value of it that
// fits: trial25's platform team, whose config priced gpt-4o-mini alone
// (256 tokens by default) under a 2000-token limit, read of
// chatgpt-4o-latest "(and of 56 other models)" and was told to lower
// models."chatgpt-4o-latest".default_max_output_tokens, a model it never
// named: the embedded price table's models take the top-level default.
func TestCheckDefaultCostNamesTheSettingToChange(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: free}]
models:
  gpt-4o-mini: {default_max_output_tokens: 256}
  gpt-4o: {default_max_output_tokens: 3000}
limits:
  - {name: free-user-tpm, scope: user, unit: tokens, rate: 2000, per: 1m}
  - {name: own-only, scope: user, unit: tokens, rate: 2000, per: 1m, models: ["gpt-4o", "gpt-4o-mini"]}
  - {name: capped, scope: user, unit: tokens, rate: 200, per: 1h, cap_output: true}
  - {name: user-daily, scope: user, unit: usd, quota: 1, period: day}
`, nil)
	free := found(fs, "limits[0]")
	if len(free) != 1 {
		t.Fatalf("limits[0]: %v, want one warning", free)
	}
	m := free[0].Message
	for _, want := range []string{
		"limit free-user-tpm holds 2000 tokens",
		"such as o1, o3, gpt-4 ", // the shortest names, not chatgpt-4o-latest
		"the embedded price table's models count",
		"the top-level default_max_output_tokens, 4096 output tokens",
		"(o1: 7 input tokens, 4096 output)",
		"set default_max_output_tokens to 1993 or less",                   // 2000 - 7 input tokens
		`gpt-4o, whose models."gpt-4o".default_max_output_tokens is 3000`, // its own default, apart
		`lower models."gpt-4o".default_max_output_tokens to 1993 or less`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("limits[0] warning lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "give the dearest") {
		t.Errorf("limits[0] warning offers a dearest model where the token costs tie:\n%s", m)
	}
	if strings.Contains(m, "chatgpt-4o-latest") {
		t.Errorf("limits[0] warning names chatgpt-4o-latest, a model the config never names, first:\n%s", m)
	}
	own := found(fs, "limits[1]")
	if len(own) != 1 || strings.Contains(own[0].Message, "top-level") ||
		!strings.Contains(own[0].Message, `lower models."gpt-4o".default_max_output_tokens to 1993 or less`) {
		t.Errorf("limits[1]: %v, want gpt-4o's own default alone (gpt-4o-mini's 256 fits)", own)
	}
	capped := found(fs, "limits[2]")
	if len(capped) != 1 || !strings.Contains(capped[0].Message, "set cap_output_min to 193 or less") {
		t.Errorf("limits[2]: %v, want the fix named as cap_output_min 193 (200 - 7 input tokens)", capped)
	}
	// One dear model under a dollar budget: its own default is the fix
	// that keeps the other models' reservations.
	daily := found(fs, "limits[3]")
	if len(daily) != 1 || !strings.Contains(daily[0].Message, "reserves for o1-pro (") ||
		!strings.Contains(daily[0].Message, "it has no default_max_output_tokens of its own") ||
		!strings.Contains(daily[0].Message, "give the dearest (o1-pro) a smaller default_max_output_tokens of its own under models:") {
		t.Errorf("limits[3]: %v, want o1-pro alone, with its own default among the fixes", daily)
	}
}

// A matcher entry that matches no key, and a models glob that fits no
// priced model, are reported.
func TestCheckMatchersThatMatchNothing(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys:
  - {key: sk-a, user: alice, tenant: acme, plan: standard}
  - {key: sk-b, user: bob, tenant: beta, plan: pro}
limits:
  - {name: typo-plan, scope: user, unit: requests, rate: 1, per: 1s, plans: [standrad, pro]}
  - {name: typo-tenant, scope: user, unit: requests, rate: 1, per: 1s, tenants: [acme, acne]}
  - {name: typo-user, scope: user, unit: requests, rate: 1, per: 1s, users: [alcie]}
  - {name: typo-model, scope: user, unit: usd, rate: 1, per: 1s, models: ["gtp-4o*", "gpt-4o*"]}
  - {name: slashed, scope: user, unit: tokens, rate: 100000, per: 1s, models: ["*/gpt-4o"]}
  - {name: fine, scope: user, unit: requests, rate: 1, per: 1s, plans: [pro], tenants: [beta], users: [bob], models: ["claude-*"]}
`, nil)
	for _, tc := range []struct{ field, says string }{
		{"limits[0].plans[0]", `no key has plan "standrad"`},
		{"limits[1].tenants[1]", `no key has tenant "acne"`},
		{"limits[2].users[0]", `no key has user "alcie"`},
		{"limits[3].models[0]", "refuses every request it fits with model_not_priced"},
		{"limits[4].models[0]", "meant for models without prices"},
	} {
		got := found(fs, tc.field)
		if len(got) != 1 || got[0].Fatal || !strings.Contains(got[0].Message, tc.says) {
			t.Errorf("%s: %v, want a warning saying %q", tc.field, got, tc.says)
		}
	}
	for _, f := range fs {
		if strings.HasPrefix(f.Field, "limits[5]") || f.Field == "limits[0].plans[1]" || f.Field == "limits[1].tenants[0]" ||
			f.Field == "limits[3].models[1]" {
			t.Errorf("%s: %s, want nothing: it matches", f.Field, f.Message)
		}
	}
	// Pass-through callers have the identity's plan and tenant, and users
	// named by their key's hash.
	fs = checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
identity: {pass_through: true, tenant: byok, plan: byok-plan}
limits:
  - {name: pt, scope: user, unit: requests, rate: 1, per: 1s, plans: [byok-plan], tenants: [byok], users: ["0123456789abcdef"]}
`, nil)
	if len(fs) != 0 {
		t.Errorf("pass-through matchers: %v, want nothing", fs)
	}
}

// A key's plan that no limit's plans matcher names, while some limit has
// one, is warned of once per plan at its first key: its calls escape
// every plan-scoped limit (the trial's key of plan "gold" beside limits
// for pro and free was held by nothing, and validate said only that no
// key has plan "free").
func TestCheckKeyPlanNoLimitNames(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys:
  - {key: sk-a, user: a, tenant: t, plan: pro}
  - {key: sk-b, user: b, tenant: t, plan: Pro}
  - {key: sk-c, user: c, tenant: t, plan: Pro}
  - {key: sk-d, user: d, tenant: t, plan: gold}
  - {key: sk-e, user: e, tenant: t}
limits:
  - {name: pro-tpm, scope: user, unit: tokens, rate: 100000, per: 1m, plans: [pro]}
  - {name: free-tpm, scope: user, unit: tokens, rate: 100000, per: 1m, plans: [free]}
`, nil)
	for _, tc := range []struct{ field, says string }{
		{"keys[1].plan", `no limit names plan "Pro" in its plans (plans limits name: free, pro), so keys of this plan are held by no limit at all: its calls are unlimited (a limit names pro: is one of the two misspelt?)`},
		{"keys[3].plan", `no limit names plan "gold" in its plans (plans limits name: free, pro), so keys of this plan are held by no limit at all: its calls are unlimited`},
	} {
		got := found(fs, tc.field)
		if len(got) != 1 || got[0].Fatal || got[0].Message != tc.says {
			t.Errorf("%s: %v, want a warning %q", tc.field, got, tc.says)
		}
	}
	for _, f := range fs {
		if strings.HasPrefix(f.Field, "keys[") && f.Field != "keys[1].plan" && f.Field != "keys[3].plan" {
			t.Errorf("%s: %s, want nothing (a named plan, a plan warned of at its first key, or no plan)", f.Field, f.Message)
		}
	}
	// A limit without plans holds every key; without any plans matcher
	// nothing is warned of.
	fs = checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-d, user: d, tenant: t, plan: gold}]
limits:
  - {name: pro-tpm, scope: user, unit: tokens, rate: 100000, per: 1m, plans: [pro]}
  - {name: all-rpm, scope: user, unit: requests, rate: 10, per: 1s}
`, nil)
	if got := found(fs, "keys[0].plan"); len(got) != 1 || !strings.Contains(got[0].Message, "held by only the 1 limit(s) without a plans matcher") {
		t.Errorf("keys[0].plan: %v", got)
	}
	fs = checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-d, user: d, tenant: t, plan: gold}]
limits: [{name: all-rpm, scope: user, unit: requests, rate: 10, per: 1s}]
`, nil)
	if got := found(fs, "keys[0].plan"); len(got) != 0 {
		t.Errorf("no plans matcher: %v, want nothing", got)
	}
}

// A region_exchange peer given this region's own Redis, or another peer's,
// is warned of on the peer (the trial's us config named its own Redis as
// eu's: both regions sat at their floor, 0.05 of the limit, for good);
// distinct Redis servers or databases are not.
func TestCheckRegionPeersShareARedis(t *testing.T) {
	cfg := func(store, eu, ap string) string {
		return `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, user: a, tenant: t}]
region: us
region_exchange: {every: 5s, peers: {eu: "` + eu + `", ap: "` + ap + `"}}
limits: [{name: org, scope: global, unit: tokens, rate: 100000, per: 1m, regions: {eu: 0.4, us: 0.4, ap: 0.2}}]
store: {backend: redis, redis_url: "` + store + `"}
`
	}
	fs := checkOf(t, cfg("redis://127.0.0.1:6391/0", "redis://127.0.0.1:6391", "redis://127.0.0.1:6392/0"), nil)
	if got := found(fs, "region_exchange.peers.eu"); len(got) != 1 || got[0].Fatal ||
		!strings.Contains(got[0].Message, "region eu is given the Redis of region us (127.0.0.1:6391, db 0, as store.redis_url)") {
		t.Errorf("peer eu on the store's Redis: %v", got)
	}
	if got := found(fs, "region_exchange.peers.ap"); len(got) != 0 {
		t.Errorf("peer ap on its own Redis: %v, want nothing", got)
	}
	fs = checkOf(t, cfg("redis://127.0.0.1:6391/0", "redis://127.0.0.1:6392/0", "redis://127.0.0.1:6392/0"), nil)
	if got := found(fs, "region_exchange.peers.eu"); len(got) != 1 || !strings.Contains(got[0].Message, "region eu is given the Redis of region ap") {
		t.Errorf("peers ap and eu on one Redis: %v", got)
	}
	fs = checkOf(t, cfg("redis://127.0.0.1:6391/0", "redis://127.0.0.1:6391/1", "redis://127.0.0.1:6392/0"), nil)
	for _, f := range fs {
		if strings.HasPrefix(f.Field, "region_exchange") {
			t.Errorf("distinct databases: %s: %s, want nothing", f.Field, f.Message)
		}
	}
}

// A dollar limit below a search model's default cost is reported with its
// per-request search fee counted: sonar's minimal request costs a few
// µUSD in tokens (at $1 / $1 per million) and its $30 per 1,000 default
// low fee, above a 0.02 USD quota; without the fee it would fit.
func TestCheckLimitBelowDefaultCostCountsSearchFee(t *testing.T) {
	fs := checkOf(t, `
upstreams: [{name: a, flavor: openai, base_url: "http://x", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: free}]
models:
  sonar: {input_usd_per_mtok: 1, output_usd_per_mtok: 1, default_max_output_tokens: 256}
limits:
  - {name: sonar-dollars, scope: user, unit: usd, quota: 0.02, period: day, models: ["sonar"]}
`, nil)
	if got := found(fs, "limits[0]"); len(got) != 1 || !strings.Contains(got[0].Message, "reserves for sonar") ||
		!strings.Contains(got[0].Message, "a minimal request to sonar costs more even with no output") {
		t.Errorf("limits[0]: %v, want a warning: sonar's $0.03 search fee does not fit $0.02", got)
	}
}
