package weigher

import (
	"strings"
	"testing"
)

// Which model names reason unseen by default (Estimate.HiddenReasoning
// without a word of the body asking): every spelling of an o-series,
// gpt-5, Gemini or grok-4 name a gateway, a fine-tune or Bedrock gives it,
// through every API kind that names a model, and none of the families
// whose reasoning is visible text (adv53).
func TestAdv53HiddenReasoningFamilies(t *testing.T) {
	w := testWeigher(t)
	chat := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	for _, tc := range []struct {
		kind Kind
		body string
		want bool
	}{
		{KindChat, chat("O3"), true},
		{KindChat, chat("openai/o3"), true},
		{KindChat, chat("azure/o3-mini"), true},
		{KindChat, chat("ft:o4-mini-2025-04-16:acme::abc123"), true},
		{KindChat, chat("ft:gpt-4o-mini-2024-07-18:acme::abc123"), false},
		{KindChat, chat("us.openai.gpt-5-mini"), true},
		{KindChat, chat("GPT-5.1"), true},
		{KindChat, chat("Google/Gemini-2.5-Pro"), true},
		{KindChat, chat("grok-4"), true},
		{KindChat, chat("x-ai/grok-4"), true},
		{KindChat, chat("grok-4-0709"), true},
		{KindChat, chat("grok-4-fast-reasoning"), true},
		{KindChat, chat("grok-4.1-fast-reasoning"), true},
		{KindChat, chat("xai/Grok-4-1-Fast-Reasoning"), true},
		{KindChat, chat("grok-5"), true},
		{KindChat, chat("grok-10"), true},
		{KindChat, chat("grok-4-fast-non-reasoning"), false},
		{KindChat, chat("grok-4-1-fast-non-reasoning"), false},
		{KindChat, chat("grok-3"), false},
		{KindChat, chat("grok-3-mini"), false},
		{KindChat, chat("grok-2-1212"), false},
		{KindChat, chat("grok-"), false},
		{KindChat, chat("grok-code-fast-1"), false},
		{KindChat, chat("deepseek-reasoner"), false},
		{KindChat, chat("deepseek/deepseek-r1"), false},
		{KindChat, chat("qwq-plus"), false},
		{KindChat, chat("qwen3-235b-a22b-thinking-2507"), false},
		{KindChat, chat("magistral-medium-latest"), false},
		{KindChat, chat("claude-sonnet-4-5"), false},
		{KindResponses, `{"model":"grok-4","input":"hi"}`, true},
		{KindResponses, `{"model":"ft:o4-mini-2025-04-16:acme::x","input":"hi"}`, true},
		{KindMessages, `{"model":"o3","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, true},
		{KindMessages, `{"model":"gemini-2.5-flash","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, true},
		{KindMessages, `{"model":"claude-opus-4-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if !est.Parsed {
			t.Fatalf("%s: not parsed: %s", tc.body, est.FaultDetail)
		}
		if est.HiddenReasoning != tc.want {
			t.Errorf("%s %s: HiddenReasoning %v, want %v", tc.kind, tc.body, est.HiddenReasoning, tc.want)
		}
	}
}

// An alias (config alias_of, weigher.Model.Family) of a model that reasons
// unseen reasons unseen: the alias's own name says nothing.
func TestAdv53HiddenReasoningAlias(t *testing.T) {
	w, err := New(Options{Models: map[string]Model{
		"team-thinker": {Family: "o3"},
		"team-grok":    {Family: "xai/grok-4"},
		"team-chat":    {Family: "gpt-4o"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]bool{"team-thinker": true, "Team-Thinker": true, "team-grok": true, "team-chat": false} {
		est := w.Weigh(KindChat, []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		if est.HiddenReasoning != want {
			t.Errorf("alias %s: HiddenReasoning %v, want %v", model, est.HiddenReasoning, want)
		}
	}
}

// hiddenReasoningFamily reads a name as every gateway spells it: in any
// ASCII case, and behind any route path ("x-ai/", "openrouter/x/").
func FuzzHiddenReasoningFamily(f *testing.F) {
	for _, s := range []string{"grok-4", "grok-4-fast-non-reasoning", "grok-99999999999999999999", "o3", "ft:o4-mini:a::b", "gemini-2.5-pro", "gpt-5", "grok-"} {
		f.Add(s, "x-ai")
	}
	f.Fuzz(func(t *testing.T, name, route string) {
		got := hiddenReasoningFamily(name)
		upper := []byte(name)
		for i, c := range upper {
			if 'a' <= c && c <= 'z' {
				upper[i] = c - ('a' - 'A')
			}
		}
		if hiddenReasoningFamily(string(upper)) != got {
			t.Fatalf("%q: %v, but %q answers %v", name, got, upper, !got)
		}
		if strings.IndexByte(name, '/') < 0 && hiddenReasoningFamily(route+"/"+name) != got {
			t.Fatalf("%q: %v, but %q answers %v", name, got, route+"/"+name, !got)
		}
	})
}
