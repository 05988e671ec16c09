package weigher

import (
	"strings"
	"testing"
)

func TestCanonicalModel(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"claude-opus-4-7", "claude-opus-4-7"},
		{"anthropic/claude-opus-4-7", "claude-opus-4-7"},
		{"anthropic/claude-opus-4.7", "claude-opus-4-7"},
		{"openrouter/anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"},
		{"us.anthropic.claude-opus-4-7-v1:0", "claude-opus-4-7-v1:0"},
		{"anthropic.claude-3-haiku-20240307-v1:0", "claude-3-haiku-20240307-v1:0"},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929-v1:0"},
		{"publishers/anthropic/models/claude-opus-4-7@20260101", "claude-opus-4-7@20260101"},
		{"openai/gpt-4o-mini", "gpt-4o-mini"},
		{"azure/gpt-4.1-mini", "gpt-4.1-mini"},
		{"openai.gpt-oss-120b-1:0", "gpt-oss-120b-1:0"},
		{"ft:gpt-4o-mini-2024-07-18:org::abc", "gpt-4o-mini-2024-07-18:org::abc"},
		{"gpt-4.1", "gpt-4.1"},
		{"llama-3.1-8b", "llama-3.1-8b"},
		{"", ""},
		{"x/", ""},
	} {
		if got := canonicalModel(tc.in); got != tc.want {
			t.Errorf("canonicalModel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// familyWeigher configures aliases as the app does for alias_of
// (Model.Family the target).
func familyWeigher(t *testing.T) *Weigher {
	t.Helper()
	w, err := New(Options{Models: map[string]Model{
		"my-claude":      {Family: "claude-opus-4-7"},
		"my-mini":        {Family: "gpt-4o-mini"},
		"my-bedrock":     {Family: "us.anthropic.claude-opus-4-7-v1:0"},
		"claude-haiku-x": {Family: "claude-3-haiku"},
	}, DefaultMaxOutputTokens: 100, CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A provider-prefixed, Bedrock, Vertex, dotted or aliased Claude name on
// /v1/messages is counted as the Claude model it names: text by its safety
// factor, images by its image cap, tools by its tool prompt (the
// adversarial tester's anthropic/claude-opus-4-7 reserved 2,009 for text
// and 1,608 for a URL image, claude-opus-4-7 3,210 and 8,855).
func TestMessagesFamilyOfDecoratedNames(t *testing.T) {
	w := familyWeigher(t)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	bodies := map[string]string{
		"text":  `{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":"` + text + `"}]}`,
		"image": `{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`,
		"tools": `{"model":%q,"max_tokens":10,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`,
	}
	for what, b := range bodies {
		want := w.Weigh(KindMessages, []byte(strings.Replace(b, "%q", `"claude-opus-4-7"`, 1)))
		for _, name := range []string{"anthropic/claude-opus-4-7", "us.anthropic.claude-opus-4-7-v1:0", "claude-opus-4-7@20260101",
			"anthropic/claude-opus-4.7", "my-claude", "my-bedrock", "openrouter/anthropic/claude-opus-4.7:thinking"} {
			got := w.Weigh(KindMessages, []byte(strings.Replace(b, "%q", `"`+name+`"`, 1)))
			if got.InputTokens != want.InputTokens {
				t.Errorf("%s %s: %d input tokens, claude-opus-4-7 %d", what, name, got.InputTokens, want.InputTokens)
			}
		}
		// An older Claude stays on its own (cheaper) rules; an alias of it too.
		old := w.Weigh(KindMessages, []byte(strings.Replace(b, "%q", `"claude-3-haiku-20240307"`, 1)))
		for _, name := range []string{"anthropic.claude-3-haiku-20240307-v1:0", "claude-haiku-x"} {
			if got := w.Weigh(KindMessages, []byte(strings.Replace(b, "%q", `"`+name+`"`, 1))); got.InputTokens != old.InputTokens {
				t.Errorf("%s %s: %d input tokens, claude-3-haiku %d", what, name, got.InputTokens, old.InputTokens)
			}
		}
		// A name recognised as no Claude model gets the dearest Claude rules.
		for _, name := range []string{"kimi-k2", "my-gateway-model", ""} {
			if got := w.Weigh(KindMessages, []byte(strings.Replace(b, "%q", `"`+name+`"`, 1))); got.InputTokens < want.InputTokens {
				t.Errorf("%s %q: %d input tokens, below claude-opus-4-7's %d", what, name, got.InputTokens, want.InputTokens)
			}
		}
	}
}

// A provider-prefixed or aliased OpenAI name is counted by its model's
// image rule (openai/gpt-4o-mini's low-detail image reserved 93 for
// gpt-4o-mini's 2,841), a name of no family by the dearest rule, and a
// Claude name behind an OpenAI-compatible endpoint by Claude's rules.
func TestOpenAIFamilyOfDecoratedNames(t *testing.T) {
	w := familyWeigher(t)
	chat := `{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"%s"}}]}]}`
	resp := `{"model":%q,"max_output_tokens":10,"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"%s"}]}]}`
	for _, k := range []struct {
		kind Kind
		body string
	}{{KindChat, chat}, {KindResponses, resp}} {
		for _, detail := range []string{"low", "high"} {
			mk := func(m string) []byte {
				return []byte(strings.Replace(strings.Replace(k.body, "%q", `"`+m+`"`, 1), "%s", detail, 1))
			}
			want := w.Weigh(k.kind, mk("gpt-4o-mini"))
			for _, name := range []string{"openai/gpt-4o-mini", "my-mini", "azure/gpt-4o-mini-2024-07-18", "llava-next"} {
				if got := w.Weigh(k.kind, mk(name)); got.InputTokens < want.InputTokens {
					t.Errorf("%v %s %s: %d input tokens, gpt-4o-mini %d", k.kind, detail, name, got.InputTokens, want.InputTokens)
				}
			}
			if got := w.Weigh(k.kind, mk("openai/gpt-4o-mini")); got.InputTokens != want.InputTokens {
				t.Errorf("%v %s: openai/gpt-4o-mini %d, gpt-4o-mini %d", k.kind, detail, got.InputTokens, want.InputTokens)
			}
			// Unchanged: a recognised OpenAI name keeps its own rule.
			if got := w.Weigh(k.kind, mk("gpt-4o")); got.InputTokens >= want.InputTokens {
				t.Errorf("%v %s: gpt-4o %d, not below gpt-4o-mini's %d", k.kind, detail, got.InputTokens, want.InputTokens)
			}
		}
	}
	// Claude through chat: text scaled by Claude's factor, images by
	// Claude's cap (8,848 for Opus 4.7), as on /v1/messages.
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	plain := w.Weigh(KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"`+text+`"}]}`))
	opus := w.Weigh(KindChat, []byte(`{"model":"anthropic/claude-opus-4.7","messages":[{"role":"user","content":"`+text+`"}]}`))
	if float64(opus.InputTokens) < 1.55*float64(plain.InputTokens) {
		t.Errorf("chat anthropic/claude-opus-4.7: %d input tokens, gpt-4o %d: not scaled by 1.6", opus.InputTokens, plain.InputTokens)
	}
	img := w.Weigh(KindChat, mk2(chat, "anthropic/claude-opus-4-7", "high"))
	if img.InputTokens < hiResMaxImageTokens {
		t.Errorf("chat anthropic/claude-opus-4-7 URL image: %d input tokens, below Claude's cap %d", img.InputTokens, hiResMaxImageTokens)
	}
}

func mk2(body, model, detail string) []byte {
	return []byte(strings.Replace(strings.Replace(body, "%q", `"`+model+`"`, 1), "%s", detail, 1))
}
