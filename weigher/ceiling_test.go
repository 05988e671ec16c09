package weigher

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestCeiling walks the usage ceiling's bounds (Ceiling's doc argues
// them): the configured window or the default for an unknown model, n
// choices, a server loop, a large body, a reservation above the window,
// saturation. Every request allows 1,000 web and file searches beyond
// those it reserves (ceilingSearches): a model searches on its own, and
// a bound of 10 per model call held Perplexity's deep research (74
// num_search_queries in one chat call) to 10. Image tokens: as many calls
// of the dearest image with its partial images, or the reservation.
func TestCeiling(t *testing.T) {
	w, err := New(Options{DefaultMaxOutputTokens: 256, Models: map[string]Model{"small": {MaxInputTokens: 20_000, MaxOutputTokens: 1_000}}})
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := New(Options{CeilingWindow: 50_000, CostCeilingMicroUSD: 2_500_000})
	if err != nil {
		t.Fatal(err)
	}
	const win = 21_000 // small's window
	// Image tokens: 1,000 calls (as file searches) of the dearest image,
	// 6,240 tokens, and 3 partial images of 100.
	const img = 1000 * 6540
	for _, tc := range []struct {
		name string
		w    *Weigher
		e    Estimate
		want Usage
	}{
		{"step 1 (configured window)", w, Estimate{Model: "small", InputTokens: 10, OutputTokens: 50, Choices: 1},
			Usage{InputTokens: win, OutputTokens: win, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 2 (unknown model: the default window)", w, Estimate{Model: "other", InputTokens: 10, OutputTokens: 50, Choices: 1},
			Usage{InputTokens: DefaultCeilingWindow, OutputTokens: DefaultCeilingWindow, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 3 (configured default window)", narrow, Estimate{Model: "other", InputTokens: 10, OutputTokens: 50},
			Usage{InputTokens: 50_000, OutputTokens: 50_000, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 4 (n = 3: three completions, the prompt perhaps billed thrice)", w, Estimate{Model: "small", InputTokens: 10, OutputTokens: 150, Choices: 3},
			Usage{InputTokens: 3 * win, OutputTokens: 3 * win, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 5 (server loop: 100 calls)", w, Estimate{Model: "small", InputTokens: 20_000, OutputTokens: 50, Choices: 1, ServerContext: true},
			Usage{InputTokens: 100 * 2 * 20_000, OutputTokens: 100 * win, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 6 (server loop: more searches than 100 calls)", w, Estimate{Model: "small", InputTokens: 10, OutputTokens: 50, ServerContext: true, WebSearches: 500},
			Usage{InputTokens: 501 * win, OutputTokens: 501 * win, WebSearches: 500 + 5010, FileSearches: 5010, ImageTokens: 5010 * 6540}},
		{"step 7 (a body above the window: twice its estimate)", w, Estimate{Model: "small", InputTokens: 400_000, OutputTokens: 50, Choices: 1},
			Usage{InputTokens: 800_000, OutputTokens: win, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 8 (a reservation above the window, a prediction)", w, Estimate{Model: "small", InputTokens: 10, OutputTokens: 90_000, PredictionTokens: 4_000, Choices: 1},
			Usage{InputTokens: win, OutputTokens: 90_000, WebSearches: 1000, FileSearches: 1000, ImageTokens: img}},
		{"step 9 (saturated)", w, Estimate{Model: "other", InputTokens: maxTokens, OutputTokens: maxTokens, Choices: maxTokens, ServerContext: true, WebSearches: maxTokens},
			Usage{InputTokens: maxTokens, OutputTokens: maxTokens, WebSearches: maxTokens, FileSearches: maxTokens, ImageTokens: math.MaxInt32}},
		{"step 10 (image tokens reserved above the ceiling's own)", w, Estimate{Model: "small", InputTokens: 10, OutputTokens: 50, Choices: 1, ImageTokens: 2e9},
			Usage{InputTokens: win, OutputTokens: win, WebSearches: 1000, FileSearches: 1000, ImageTokens: 2e9}},
	} {
		got := tc.w.Ceiling(&tc.e)
		// The cost bound: the configured one, else DefaultCostCeilingMicroUSD.
		tc.want.BilledMicroUSD = DefaultCostCeilingMicroUSD
		if tc.w == narrow {
			tc.want.BilledMicroUSD = 2_500_000
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if got.InputTokens < tc.e.InputTokens || got.OutputTokens < tc.e.OutputTokens || got.WebSearches < tc.e.WebSearches || got.ImageTokens < tc.e.ImageTokens {
			t.Errorf("%s: ceiling %+v below the reservation %+v", tc.name, got, tc.e)
		}
	}
	if _, err := New(Options{CeilingWindow: -1}); err == nil {
		t.Error("a negative CeilingWindow was accepted")
	}
	if _, err := New(Options{CostCeilingMicroUSD: -1}); err == nil {
		t.Error("a negative CostCeilingMicroUSD was accepted")
	}
}

// The usage ceiling of a chat model whose rules the Weigher holds reads
// the model's configured window from them (chatRules.maxIn, maxOut): for
// configured names with and without a window, a name configured by
// prefix, decorated and upper-case names, names not configured, a name
// too long to hold, and more names than the table has slots (so that
// names replace each other's), with and without the long-context grant,
// each ceiling is the one found through the configuration (a copy of the
// Weigher that holds no rules), after every chat body weighed; and a
// ceiling asked before any body holds no rules (heldChatRules).
func TestCeilingHeldSameAsFound(t *testing.T) {
	w, err := New(Options{DefaultMaxOutputTokens: 256, Models: map[string]Model{
		"big":        {MaxInputTokens: 200_000, MaxOutputTokens: 64_000},
		"wide-in":    {MaxInputTokens: 1_000_000},
		"no-window":  {MaxOutputTokens: 8_000},
		"gpt-4o":     {MaxInputTokens: 128_000, MaxOutputTokens: 16_384},
		"my-claude":  {Family: "claude-opus-4-7", MaxInputTokens: 500_000, MaxOutputTokens: 32_000},
		"tiny-model": {MaxInputTokens: 4_000, MaxOutputTokens: 1_000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	found := *w
	found.rules = nil // finds every window through the configuration
	names := []string{"big", "wide-in", "no-window", "gpt-4o", "gpt-4o-2024-08-06", "GPT-4o", "openai/gpt-4o", "my-claude",
		"tiny-model", "unknown-model", "o3", strings.Repeat("big-", 20)}
	for i := range 24 {
		names = append(names, fmt.Sprintf("tiny-model-%d", i)) // by prefix; more names than slots
	}
	if c := w.Ceiling(&Estimate{Model: "big"}); c.InputTokens != 264_000 || w.heldChatRules("big") != nil {
		t.Fatalf("before any body: input ceiling %d (want 264000), rules held %v", c.InputTokens, w.heldChatRules("big") != nil)
	}
	held := 0
	for round := range 2 {
		for _, name := range names {
			if est := w.Weigh(KindChat, []byte(`{"model":"`+name+`","messages":[{"role":"user","content":"hi"}]}`)); !est.Parsed {
				t.Fatalf("%q: not parsed", name)
			}
			if w.heldChatRules(name) != nil {
				held++
			}
			for _, other := range names {
				for _, long := range []bool{false, true} {
					e := Estimate{Model: other, LongContext: long, InputTokens: 10, OutputTokens: 20, Choices: 1}
					if got, want := w.Ceiling(&e), found.Ceiling(&e); got != want {
						t.Fatalf("round %d, after %q: ceiling of %q (long context %v) %+v, found %+v", round, name, other, long, got, want)
					}
				}
			}
		}
	}
	if held < len(names) {
		t.Fatalf("rules held after %d of %d bodies", held, 2*len(names))
	}
	if c := w.Ceiling(&Estimate{Model: "big"}); c.InputTokens != 264_000 {
		t.Fatalf("big's input ceiling %d, want 264000", c.InputTokens)
	}
}
