package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// embedded compiles a config with nothing but the embedded price table.
func embedded(t *testing.T, extra string) *Policy {
	t.Helper()
	p, err := Compile(mustConfig(t, "upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// perMTok is a price list in USD per million tokens, as the providers
// publish them: input, cached input, 5-minute and 1-hour cache writes,
// output.
type perMTok struct{ in, cached, write, write1h, out float64 }

// costOf is what a million tokens of each kind cost at q's price, in USD:
// one cost per field, read back through MicroUSD on 100,000 tokens (below
// every long-context threshold) times ten.
func costOf(q Quote) perMTok {
	const n = 100_000
	usd := func(u spec.Usage) float64 { return float64(q.Price.MicroUSD(u)) * 10 / 1e6 }
	return perMTok{
		in:      usd(spec.Usage{InputTokens: n}),
		cached:  usd(spec.Usage{InputTokens: n, CachedInputTokens: n}),
		write:   usd(spec.Usage{InputTokens: n, CacheWriteTokens: n}),
		write1h: usd(spec.Usage{InputTokens: n, CacheWriteTokens: n, CacheWrite1hTokens: n}),
		out:     usd(spec.Usage{OutputTokens: n}),
	}
}

// The embedded table prices every model family at its published list
// price (config/prices.json names the sources and the date), each name as
// itself: a name that merely starts with a cheaper model's name (gpt-5-pro,
// o3-pro, o1-pro, claude-opus-4-1) is never priced as that model. A model
// added to the table without a row here fails the test.
func TestEmbeddedPricesEveryFamily(t *testing.T) {
	p := embedded(t, "")
	// Standard tier, USD per million tokens. Zero cached / write fields
	// are the input price (OpenAI has no cache writes; -pro models no
	// cached price).
	openai := func(in, cached, out float64) perMTok {
		if cached == 0 {
			cached = in
		}
		return perMTok{in, cached, in, in, out}
	}
	claude := func(in, out float64) perMTok { return perMTok{in, in / 10, in * 1.25, in * 2, out} }
	want := map[string]perMTok{
		// GPT-5 family, -pro included
		"gpt-5.5": openai(5, 0.5, 30), "gpt-5.5-pro": openai(30, 0, 180),
		"gpt-5.4": openai(2.5, 0.25, 15), "gpt-5.4-pro": openai(30, 0, 180), "gpt-5.4-mini": openai(0.75, 0.075, 4.5), "gpt-5.4-nano": openai(0.2, 0.02, 1.25),
		"gpt-5.2": openai(1.75, 0.175, 14), "gpt-5.2-pro": openai(21, 0, 168),
		"gpt-5.1": openai(1.25, 0.125, 10), "gpt-5.1-codex": openai(1.25, 0.125, 10),
		"gpt-5": openai(1.25, 0.125, 10), "gpt-5-codex": openai(1.25, 0.125, 10), "gpt-5-chat-latest": openai(1.25, 0.125, 10),
		"gpt-5-mini": openai(0.25, 0.025, 2), "gpt-5-nano": openai(0.05, 0.005, 0.4),
		"gpt-5-pro": openai(15, 0, 120), // was priced as gpt-5: 12× too low
		// o-series, -pro included
		"o1": openai(15, 7.5, 60), "o1-pro": openai(150, 0, 600), "o1-mini": openai(1.1, 0.55, 4.4),
		"o3": openai(2, 0.5, 8), "o3-pro": openai(20, 0, 80), // o3-pro was priced as o3: 10× too low
		"o3-mini": openai(1.1, 0.55, 4.4), "o3-deep-research": openai(10, 2.5, 40),
		"o4-mini": openai(1.1, 0.275, 4.4), "o4-mini-deep-research": openai(2, 0.5, 8),
		// GPT-4.1, GPT-4o
		"gpt-4.1": openai(2, 0.5, 8), "gpt-4.1-mini": openai(0.4, 0.1, 1.6), "gpt-4.1-nano": openai(0.1, 0.025, 0.4),
		"gpt-4o": openai(2.5, 1.25, 10), "gpt-4o-2024-05-13": openai(5, 0, 15), "chatgpt-4o-latest": openai(5, 0, 15),
		"gpt-4o-mini": openai(0.15, 0.075, 0.6),
		// older OpenAI names, and snapshots priced above their base
		"gpt-4-turbo": openai(10, 0, 30), "gpt-4": openai(30, 0, 60), "gpt-3.5-turbo": openai(0.5, 0, 1.5),
		"gpt-3.5-turbo-1106": openai(1, 0, 2), "gpt-3.5-turbo-0613": openai(1.5, 0, 2),
		"gpt-3.5-turbo-instruct": openai(1.5, 0, 2), // its model page: $1.50 in, $2 out
		// embeddings
		"gpt-image-1": openai(5, 1.25, 40), "gpt-image-1-mini": openai(2, 0.2, 8), // image output tokens
		"text-embedding-3-small": openai(0.02, 0, 0), "text-embedding-3-large": openai(0.13, 0, 0),
		"text-embedding-ada-002": openai(0.1, 0, 0),
		// Claude 5.x (prices55): Anthropic's pricing and model pages; a
		// cache hit reported below 0.1x input (Opus 5.5, Fable 5.2) kept at 0.1x
		"claude-opus-5": claude(5, 25), "claude-opus-5-5": claude(4, 20),
		"claude-sonnet-5": claude(2, 10), "claude-sonnet-5-5": claude(2, 10), "claude-haiku-5-5": claude(0.1, 0.5),
		"claude-fable-5": claude(10, 50), "claude-mythos-5": claude(10, 50), "claude-fable-5-2": claude(8, 40),
		"claude-fable-5-1": {10, 0.25, 12.5, 20, 50}, "claude-mythos-5-1": {10, 0.25, 12.5, 20, 50},
		// Claude 4.x, Opus 4.1 included, and the Claude 3.x names
		"claude-opus-4-8": claude(5, 25), "claude-opus-4-7": claude(5, 25), "claude-opus-4-6": claude(5, 25),
		"claude-opus-4-5": claude(5, 25), "claude-opus-4-1": claude(15, 75), "claude-opus-4": claude(15, 75),
		"claude-opus-4-0":   claude(15, 75),
		"claude-sonnet-4-6": claude(3, 15), "claude-sonnet-4-5": claude(3, 15), "claude-sonnet-4": claude(3, 15),
		"claude-sonnet-4-0": claude(3, 15), "claude-haiku-4-5": claude(1, 5),
		"claude-3-7-sonnet": claude(3, 15), "claude-3-7-sonnet-latest": claude(3, 15),
		"claude-3-5-haiku": claude(0.8, 4), "claude-3-5-haiku-latest": claude(0.8, 4),
		"claude-3-haiku": {0.25, 0.03, 0.3, 0.5, 1.25},
		"claude-3-opus":  claude(15, 75), "claude-3-opus-latest": claude(15, 75),
	}
	var table map[string]json.RawMessage
	if err := json.Unmarshal(config.DefaultPricesJSON, &table); err != nil {
		t.Fatal(err)
	}
	for name := range table {
		if _, ok := want[name]; !ok && name != "llmguard_price_table" && !strings.Contains(name, "-x-") { // per-image entries: TestImagePrices
			t.Errorf("%s is in config/prices.json but has no expected price here", name)
		}
	}
	for name, w := range want {
		q := p.Quote(name, "")
		if !q.Priced || q.Label != name {
			t.Errorf("%s: quoted %+v, want priced as itself", name, q)
			continue
		}
		if got := costOf(q); !closeTo(got, w) {
			t.Errorf("%s: $/Mtok %+v, want %+v", name, got, w)
		}
	}
	// The ones that were under-priced, against what they used to take.
	for _, tc := range []struct{ model, cheaper string }{
		{"gpt-5-pro", "gpt-5"}, {"o3-pro", "o3"}, {"o1-pro", "o1"}, {"gpt-5.2-pro", "gpt-5.2"},
		{"claude-opus-4-1", "claude-opus-4-5"}, {"gpt-4o-2024-05-13", "gpt-4o"},
	} {
		a, b := costOf(p.Quote(tc.model, "")), costOf(p.Quote(tc.cheaper, ""))
		if a.in <= b.in || a.out <= b.out {
			t.Errorf("%s ($%v/$%v) is not priced above %s ($%v/$%v)", tc.model, a.in, a.out, tc.cheaper, b.in, b.out)
		}
	}
}

// closeTo compares prices to the micro-dollar rounding MicroUSD applies.
func closeTo(a, b perMTok) bool {
	near := func(x, y float64) bool { return x-y < 1e-6 && y-x < 1e-6 }
	return near(a.in, b.in) && near(a.cached, b.cached) && near(a.write, b.write) && near(a.write1h, b.write1h) && near(a.out, b.out)
}

// Only a date suffix makes a name a snapshot of a priced model; any other
// name is priced by itself, by an alias, or not at all.
func TestSnapshotSuffixes(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		ok         bool
	}{
		{"gpt-4o-2024-08-06", "gpt-4o", true},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini", true},
		{"gpt-5-pro-2025-10-06", "gpt-5-pro", true},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5", true},
		{"claude-opus-4-20250514", "claude-opus-4", true},
		{"claude-3-haiku-20240307", "claude-3-haiku", true},
		{"gpt-4-0613", "gpt-4", true},
		{"gpt-3.5-turbo-0125", "gpt-3.5-turbo", true},
		{"gpt-5-pro", "", false},
		{"o3-pro", "", false},
		{"o1-pro", "", false},
		{"claude-opus-4-1", "", false},
		{"gpt-4o-latest", "", false},
		{"gpt-4-1106-preview", "", false},
		{"gpt-4o-2024-13-06", "", false}, // no month 13
		{"gpt-4o-2024-08-32", "", false},
		{"gpt-4o-1999-08-06", "", false},
		{"gpt-4o-20241306", "", false},
		{"gpt-4-1300", "", false},
		{"gpt-4-0600", "", false},
		{"model-2048", "", false},
		{"-0613", "", false},
		{"2024-08-06", "", false},
		{"gpt-4o-2024-8-06", "", false},
	} {
		base, ok := SnapshotOf(tc.name)
		if ok != tc.ok || base != tc.base {
			t.Errorf("SnapshotOf(%q) = %q, %v; want %q, %v", tc.name, base, ok, tc.base, tc.ok)
		}
	}
	p := embedded(t, "")
	for _, tc := range []struct{ model, label string }{
		{"gpt-5-pro-2025-10-06", "gpt-5-pro"},
		{"o3-pro-2025-06-10", "o3-pro"},
		{"claude-opus-4-1-20250805", "claude-opus-4-1"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13"}, // listed: it costs more than gpt-4o
		{"gpt-4o-2024-11-20", "gpt-4o"},
		{"gpt-5-turbo", ""},                        // starts with gpt-5, but is no snapshot of it
		{"gpt-5-pro-x", ""},                        // nor of gpt-5-pro
		{"o3-pro-max", ""},                         // nor of o3-pro
		{"openai/gpt-4o", ""},                      // a provider prefix is an alias to give
		{"GPT-4O", "gpt-4o"},                       // another case is the same name to a lenient upstream
		{"GPT-4o-2024-11-20", "gpt-4o"},            // and a snapshot in another case
		{"Gpt-4O-2024-05-13", "gpt-4o-2024-05-13"}, // the listed snapshot first
		{"GPT-5-PRO-X", ""},                        // still no prefix match
	} {
		if q := p.Quote(tc.model, ""); q.Label != tc.label || q.Priced != (tc.label != "") {
			t.Errorf("%s: quoted as %q (priced %v), want %q", tc.model, q.Label, q.Priced, tc.label)
		}
	}
}

// An alias is priced as its target in every tier; default_price prices
// what has no price; an entry that sets no price is not a price.
func TestAliasesAndDefaultPrice(t *testing.T) {
	p := embedded(t, `
models:
  openai/gpt-4o: {alias_of: gpt-4o}
  house-claude: {alias_of: claude-sonnet-4-5, default_max_output_tokens: 100}
  my-llama: {encoding: cl100k_base, default_max_output_tokens: 512}
  chatgpt-4o-latest: {alias_of: gpt-4o}
`)
	// An alias over a name the table prices takes its target's prices,
	// none of the table's.
	if a, b := p.Quote("chatgpt-4o-latest", ""), p.Quote("gpt-4o", ""); a.Price != b.Price {
		t.Errorf("chatgpt-4o-latest aliased to gpt-4o quoted %+v, want gpt-4o's %+v", a.Price, b.Price)
	}
	a, b := p.Quote("openai/gpt-4o", "priority"), p.Quote("gpt-4o", "priority")
	if !a.Priced || a.Label != "openai/gpt-4o" || a.Price != b.Price {
		t.Errorf("alias quoted %+v, want gpt-4o's priority price %+v under its own name", a, b.Price)
	}
	if a, b := p.Quote("house-claude-20260101", ""), p.Quote("claude-sonnet-4-5", ""); a.Label != "house-claude" || a.Price != b.Price {
		t.Errorf("dated alias quoted %+v, want claude-sonnet-4-5's price", a)
	}
	if q := p.Quote("my-llama", ""); q.Priced || q.Missing != `models."my-llama"` {
		t.Errorf("an entry without prices quoted %+v, want unpriced", q)
	}

	d := embedded(t, "default_price: {input_usd_per_mtok: 40, output_usd_per_mtok: 160}\n")
	q := d.Quote("my-llama", "")
	if !q.Priced || !q.Default || q.Label != "" || costOf(q).in != 40 || costOf(q).out != 160 {
		t.Errorf("default_price quoted %+v, want $40/$160, no label", q)
	}
	// default_price does not stand in for a missing priority price.
	if q := d.Quote("gpt-5-nano", "priority"); q.Priced || q.Missing != `models."gpt-5-nano".priority` {
		t.Errorf("priority gpt-5-nano quoted %+v, want unpriced", q)
	}

	for _, bad := range []struct{ yaml, field string }{
		{"models: {x: {alias_of: nothing-here}}", "models.x.alias_of"},
		{"models: {x: {alias_of: x}}", "models.x.alias_of"},
		{"models: {x: {alias_of: gpt-4o, input_usd_per_mtok: 1}}", "models.x.alias_of"},
		{"models: {x: {alias_of: gpt-4o}, y: {alias_of: x}}", "models.y.alias_of"},
		{"models: {x: {encoding: cl100k_base}, y: {alias_of: x}}", "models.y.alias_of"},
		{"default_price: {}", "default_price"},
		{"default_price: {input_usd_per_mtok: -1}", "default_price.input_usd_per_mtok"},
		{"default_service_tier: premium", "default_service_tier"},
		{"models: {x: {input_usd_per_mtok: 1, long_context: {input_usd_per_mtok: 2}}}", "models.x.long_context.above_input_tokens"},
		{"models: {x: {input_usd_per_mtok: 1, priority: {output_usd_per_mtok: -2}}}", "models.x.priority.output_usd_per_mtok"},
	} {
		_, err := config.Parse([]byte("upstreams: [{name: o, flavor: openai, base_url: \"http://x\"}]\n" + bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.field+":") {
			t.Errorf("%s: err = %v, want a problem at %s", bad.yaml, err, bad.field)
		}
	}
}

// service_tier picks the tier: priority and flex at their own prices,
// "auto" and no tier at default_service_tier's; a priority request for a
// model without priority prices is not priced.
func TestServiceTiers(t *testing.T) {
	p := embedded(t, "")
	for _, tc := range []struct {
		model, tier string
		in, out     float64
		priced      bool
	}{
		{"gpt-5", "", 1.25, 10, true},
		{"gpt-5", "auto", 1.25, 10, true},
		{"gpt-5", "default", 1.25, 10, true},
		{"gpt-5", "priority", 2.5, 20, true},
		{"gpt-5", "flex", 0.625, 5, true},
		{"gpt-5-2025-08-07", "priority", 2.5, 20, true},
		{"gpt-4o-mini", "priority", 0.25, 1, true},
		{"o3", "flex", 1, 4, true},
		{"o3", "priority", 3.5, 14, true},
		{"gpt-4.1", "flex", 2, 8, true}, // no flex price: the standard one, which costs no less
		{"gpt-5-pro", "priority", 0, 0, false},
		{"claude-sonnet-4-5", "priority", 0, 0, false},
		{"gpt-5", "scale", 1.25, 10, true},
		// A spelling llmguard does not know may be one an upstream accepts
		// ("Priority"): priced at the dearest tier, never below.
		{"gpt-5", "no-such-tier", 2.5, 20, true},
		{"gpt-5", "Priority", 2.5, 20, true},
		{"gpt-5", "auto", 1.25, 10, true},
	} {
		q := p.Quote(tc.model, tc.tier)
		if q.Priced != tc.priced {
			t.Errorf("%s %q: priced %v, want %v (%+v)", tc.model, tc.tier, q.Priced, tc.priced, q)
			continue
		}
		if c := costOf(q); tc.priced && (c.in != tc.in || c.out != tc.out) {
			t.Errorf("%s %q: $%v/$%v, want $%v/$%v", tc.model, tc.tier, c.in, c.out, tc.in, tc.out)
		}
	}
	pri := embedded(t, "default_service_tier: priority\n")
	if c := costOf(pri.Quote("gpt-5", "")); c.in != 2.5 || c.out != 20 {
		t.Errorf("default_service_tier priority: gpt-5 without a tier at $%v/$%v, want priority's $2.5/$20", c.in, c.out)
	}
	if c := costOf(pri.Quote("gpt-5", "default")); c.in != 1.25 {
		t.Errorf(`default_service_tier priority: gpt-5 asking "default" at $%v, want $1.25`, c.in)
	}
}

// Past a long-context threshold every token of the request pays the
// band's rates, at admission (the estimate) and at settlement (the usage).
func TestLongContextBands(t *testing.T) {
	p := embedded(t, `
models:
  house-model:
    input_usd_per_mtok: 2
    cache_write_usd_per_mtok: 2.5
    output_usd_per_mtok: 10
    long_context: {above_input_tokens: 1000, input_usd_per_mtok: 4}
`)
	for _, tc := range []struct {
		model, tier string
		use         spec.Usage
		want        int64 // micro-USD
	}{
		// Sonnet 4.5: $3/$15, past 200K input $6/$22.50 on every token.
		{"claude-sonnet-4-5", "", spec.Usage{InputTokens: 200_000, OutputTokens: 1000}, 600_000 + 15_000},
		{"claude-sonnet-4-5", "", spec.Usage{InputTokens: 200_001, OutputTokens: 1000}, 1_200_006 + 22_500},
		// cache reads and writes count toward the threshold, at the band's prices
		{"claude-sonnet-4-5", "", spec.Usage{InputTokens: 300_000, CachedInputTokens: 250_000, CacheWriteTokens: 50_000}, 150_000 + 375_000},
		// gpt-5.4: past 272K, 2× input and 1.5× output
		{"gpt-5.4", "", spec.Usage{InputTokens: 272_000, OutputTokens: 1000}, 680_000 + 15_000},
		{"gpt-5.4", "", spec.Usage{InputTokens: 272_001, OutputTokens: 1000}, 1_360_005 + 22_500},
		// priority without a band of its own: the higher of priority's and the band's rates
		{"gpt-5.4", "priority", spec.Usage{InputTokens: 300_000, OutputTokens: 1000}, 1_500_000 + 30_000},
		// a model's own band without a cache-write price keeps the write premium (2.5/2 × 4 = 5)
		{"house-model", "", spec.Usage{InputTokens: 2000, CacheWriteTokens: 2000}, 10_000},
		{"house-model", "", spec.Usage{InputTokens: 1000, CacheWriteTokens: 1000, OutputTokens: 100}, 2_500 + 1_000},
		{"house-model", "", spec.Usage{InputTokens: 1001, OutputTokens: 100}, 4_004 + 2_000}, // output scaled 2× too
	} {
		q := p.Quote(tc.model, tc.tier)
		if got := q.Price.MicroUSD(tc.use); got != tc.want {
			t.Errorf("%s %q %+v: %d µUSD, want %d", tc.model, tc.tier, tc.use, got, tc.want)
		}
	}
}

// A LiteLLM-format file's tier and band fields are read; entries without
// an input price are skipped.
func TestParsePricesTiersAndBands(t *testing.T) {
	ms, err := config.ParsePrices([]byte(`{
  "m": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06,
        "input_cost_per_token_priority": 2e-06, "output_cost_per_token_priority": 4e-06,
        "input_cost_per_token_flex": 5e-07,
        "input_cost_per_token_above_128k_tokens": 3e-06, "output_cost_per_token_above_128k_tokens": 5e-06,
        "input_cost_per_token_above_200k_tokens": 4e-06,
        "input_cost_per_token_above_200k_tokens_priority": 8e-06,
        "input_cost_per_token_batches": 1e-09, "cache_creation_input_token_cost_above_1hr": 2e-06},
  "image-only": {"output_cost_per_image": 0.04},
  "odd": {"input_cost_per_token": "free"}
}`))
	if err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(func(yield func(string) bool) {
		for n := range ms {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(names, []string{"m"}) {
		t.Fatalf("models %v, want only m", names)
	}
	m := ms["m"]
	if m.InputUSDPerMTok != 1 || m.OutputUSDPerMTok != 2 || m.CacheWrite1hUSDPerMTok != 2 {
		t.Errorf("standard %+v", m.Standard())
	}
	if m.Priority == nil || m.Priority.InputUSDPerMTok != 2 || m.Priority.OutputUSDPerMTok != 4 {
		t.Errorf("priority %+v", m.Priority)
	}
	if m.Flex == nil || m.Flex.InputUSDPerMTok != 0.5 {
		t.Errorf("flex %+v", m.Flex)
	}
	lc := m.LongContext
	if lc == nil || lc.AboveInputTokens != 128_000 || lc.InputUSDPerMTok != 4 || lc.OutputUSDPerMTok != 5 ||
		lc.Priority == nil || lc.Priority.InputUSDPerMTok != 8 {
		t.Errorf("long context %+v (priority %+v): want the lowest threshold, the highest price of each field", lc, lc.Priority)
	}
	if _, err := config.ParsePrices([]byte(`{"m": {"input_cost_per_token": 1e-06, "output_cost_per_token_priority": -1}}`)); err == nil {
		t.Error("a negative tier price was accepted")
	}
}

// DALL·E is priced per image from the embedded table's LiteLLM entries: by
// size and quality, the dearest of the model for one the table lacks.
func TestImagePrices(t *testing.T) {
	p := embedded(t, "")
	for _, tc := range []struct {
		model, quality, size string
		want                 int64
		ok                   bool
	}{
		{"dall-e-3", "", "1024x1024", 40_000, true},
		{"dall-e-3", "standard", "1792x1024", 80_000, true},
		{"dall-e-3", "hd", "1024x1024", 80_000, true},
		{"dall-e-3", "hd", "1024x1792", 120_000, true},
		{"dall-e-3", "auto", "auto", 40_000, true},
		{"dall-e-3", "ultra", "1024x1024", 120_000, true}, // unknown: the dearest
		{"dall-e-3", "", "4096x4096", 120_000, true},
		{"dall-e-2", "", "256x256", 16_000, true},
		{"dall-e-2", "", "1024x1024", 20_000, true},
		{"gpt-image-1", "", "1024x1024", 0, false}, // billed in tokens
		{"dall-e-9", "", "1024x1024", 0, false},
	} {
		got, ok := p.ImagePrice(tc.model, tc.quality, tc.size)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %q %s: %d µUSD, %v; want %d, %v", tc.model, tc.quality, tc.size, got, ok, tc.want, tc.ok)
		}
	}
}
