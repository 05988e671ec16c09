package weigher

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The chat rules a Weigher holds for a name are the ones it finds afresh
// (findChatRules, each field from the Weigher's own methods), for
// configured names, prefixes, aliases with a family, decorated and
// upper-case names, and names that land on each other's slots, asked in
// turn so that held rules are both found and replaced.
func TestChatRulesSameAsFound(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"my-claude":   {Family: "claude-opus-4-7"},
		"my-mini":     {Family: "gpt-4o-mini"},
		"gpt-4o":      {SafetyFactor: 1.25},
		"legacy":      {Encoding: EncodingCL100k},
		"claude-3-ha": {SafetyFactor: 2},
		"my-long":     {DefaultMaxOutputTokens: 4096},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"gpt-4o-mini", "gpt-4o", "gpt-4o-2024-08-06", "gpt-4", "gpt-3.5-turbo", "o3-mini", "my-claude", "my-mini",
		"legacy", "legacy-2", "claude-3-haiku", "claude-opus-4-7", "Anthropic/Claude-Opus-4.7", "openai/gpt-4o-mini",
		"us.anthropic.claude-opus-4-7-v1:0", "ft:gpt-4o-mini-2024-07-18:org::id", "llama-3-70b", "x", "",
		"my-long", strings.Repeat("gpt-4o-", 12), "o3", "gpt-5", "gemini-2.5-pro", "grok-4", "grok-4-fast-non-reasoning"}
	for i := range 40 {
		names = append(names, fmt.Sprintf("model-%d", i)) // more names than slots
	}
	for round := range 3 {
		for _, name := range names {
			for range 2 { // found, then (unless replaced since) held
				got, want := w.chatRules(name), w.findChatRules(name)
				if *got != *want {
					t.Fatalf("round %d, %q: held %+v, found %+v", round, name, *got, *want)
				}
			}
		}
	}
	// A copy of w with another count cache, or none, shares the table:
	// each finds the contexts of its own cache, whichever asked first.
	off, other := *w, *w
	off.cache, other.cache = nil, newCountCache(1<<20)
	for _, name := range []string{"gpt-4o-mini", "gpt-4", "my-claude"} {
		for _, v := range []*Weigher{w, &off, &other, w, &other, &off} {
			if got, want := v.chatRules(name), v.findChatRules(name); *got != *want {
				t.Fatalf("%q through a copy with cache %p: held %+v, found %+v", name, v.cache, *got, *want)
			}
		}
	}
	// Held rules alias nothing of the caller's.
	b := []byte("fresh-model-name-2024")
	r := w.chatRules(bodyString(b[:len("fresh-model")])) // a view of b, as a body's bytes
	copy(b, "other-thing")
	if r.model != "fresh-model" || r.family != "fresh-model" || w.chatRules("fresh-model").model != "fresh-model" {
		t.Fatalf("held rules changed with the caller's bytes: %q, family %q", r.model, r.family)
	}
}

// A chat body that names neither web_search_options nor plugins takes its
// search fees from its model's rules (chatRules.search): they are an
// empty ask's fees for that name, held or found, and the estimate of such
// a body carries them, for names that bill a fee per request, search
// through OpenRouter's web plugin, or do neither, in any case and past
// the longest held name; a body that names either (null included) is
// priced from what it asks, the same model's held rules notwithstanding.
// A chat body that states no maximum reserves its model's default output
// (the configured Model.DefaultMaxOutputTokens, else
// Options.DefaultMaxOutputTokens) from the rules the Weigher holds for
// the name, as w.defaultOutput finds it: for a configured name with its
// own default, an alias with a family and its own default, a configured
// name without one, and names not configured, each weighed twice (the
// rules found, then held), through two slots' worth of names in turn.
func TestChatDefaultOutputHeld(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"my-long":      {DefaultMaxOutputTokens: 4096},
		"my-mini-long": {Family: "gpt-4o-mini", DefaultMaxOutputTokens: 777},
		"gpt-4o":       {SafetyFactor: 1.25},
	}, DefaultMaxOutputTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		model string
		want  int64
	}{
		{"my-long", 4096},
		{"my-mini-long", 777},
		{"gpt-4o", 100},
		{"gpt-4o-mini", 100},
		{"llama-3-70b", 100},
	}
	for round := range 2 {
		for _, c := range cases {
			for step := range 2 { // found, then held
				body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello there"}]}`, c.model)
				e := w.Chat([]byte(body))
				if !e.Parsed {
					t.Fatalf("round %d, %q, step %d: not parsed: %s", round, c.model, step, e.FaultDetail)
				}
				if e.OutputTokens != c.want || !e.OutputDefaulted || w.defaultOutput(c.model) != c.want {
					t.Fatalf("round %d, %q, step %d: output %d (defaulted %v, defaultOutput %d), want %d",
						round, c.model, step, e.OutputTokens, e.OutputDefaulted, w.defaultOutput(c.model), c.want)
				}
			}
		}
	}
}

func TestChatRulesSearchFees(t *testing.T) {
	w := testWeigher(t)
	names := []string{"gpt-4o-mini", "sonar", "Sonar-Pro", "perplexity/sonar-reasoning", "sonar-deep-research",
		"gpt-4o-search-preview", "openai/GPT-5-search-api", "meta-llama/llama-3.3-70b-instruct:online",
		"anthropic/claude-sonnet-4:ONLINE", "x", "", strings.Repeat("sonar-", 12), strings.Repeat("m", 60) + ":online"}
	for _, name := range names {
		size, results := searchAsk{}.fees(name)
		for round := range 2 { // found, then held
			if r := w.chatRules(name); r.search != size || r.searchResults != results {
				t.Fatalf("%q, round %d: rules %v, %d results; fees %v, %d", name, round, r.search, r.searchResults, size, results)
			}
			m, _ := json.Marshal(name)
			e := w.Chat([]byte(`{"model":` + string(m) + `,"messages":[{"role":"user","content":"hi"}]}`))
			if e.SearchContext != size || e.SearchResults != results {
				t.Fatalf("%q, round %d: estimate %v, %d results; fees %v, %d", name, round, e.SearchContext, e.SearchResults, size, results)
			}
		}
		for _, ask := range []string{`"web_search_options":{"search_context_size":"high"}`, `"web_search_options":null`,
			`"plugins":[{"id":"web","max_results":2,"engine":"exa"}]`, `"plugins":null`} {
			m, _ := json.Marshal(name)
			body := `{"model":` + string(m) + `,` + ask + `,"messages":[{"role":"user","content":"hi"}]}`
			want := (searchAsk{options: gjson.Get(`{`+ask+`}`, "web_search_options"), plugins: gjson.Get(`{`+ask+`}`, "plugins")})
			size, results := want.fees(name)
			if e := w.Chat([]byte(body)); e.SearchContext != size || e.SearchResults != results {
				t.Fatalf("%s: estimate %v, %d results; fees %v, %d", body, e.SearchContext, e.SearchResults, size, results)
			}
		}
	}
}

// A chat body's HiddenReasoning takes the family's default from the rules
// held for its model name (chatRules.hiddenReasoning): for each name,
// weighed twice (the rules found, then held) through more names than the
// table has slots, it is hiddenReasoningFamily of the name's family, or
// true when the body asks for reasoning itself (reasoning_effort), an
// alias taking its target's default and a bare name its own.
func TestChatHiddenReasoningHeld(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"team-thinker": {Family: "o3"},
		"team-chat":    {Family: "gpt-4o"},
		"o3-as-chat":   {Family: "gpt-4o-mini"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"o3", "o3-mini", "gpt-5", "gpt-4o", "gemini-2.5-pro", "google/Gemini-2.5-Flash", "grok-4",
		"grok-4-fast-non-reasoning", "grok-3-mini", "claude-sonnet-4-5", "ft:o4-mini-2025-04-16:org::id",
		"team-thinker", "Team-Thinker", "team-chat", "o3-as-chat", "deepseek-reasoner"}
	for i := range 20 {
		names = append(names, fmt.Sprintf("o%d-model-%d", i%5, i)) // more names than slots
	}
	seen := map[bool]int{}
	for round := range 2 {
		for _, name := range names {
			want := hiddenReasoningFamily(w.family(name))
			seen[want]++
			for range 2 { // found, then (unless replaced since) held
				est := w.Weigh(KindChat, []byte(`{"model":"`+name+`","messages":[{"role":"user","content":"hi"}]}`))
				if est.HiddenReasoning != want {
					t.Fatalf("round %d, %q: HiddenReasoning %v, want %v", round, name, est.HiddenReasoning, want)
				}
				est = w.Weigh(KindChat, []byte(`{"model":"`+name+`","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`))
				if !est.HiddenReasoning {
					t.Fatalf("round %d, %q with reasoning_effort high: HiddenReasoning false", round, name)
				}
			}
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("names of one verdict only: %v", seen)
	}
	if hiddenReasoningFamily(w.family("o3-as-chat")) || !hiddenReasoningFamily(w.family("team-thinker")) {
		t.Fatal("the aliases' families are not what this test means them to be")
	}
}
