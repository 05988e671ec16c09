package weigher

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// Examples of Anthropic's token-counting guide
// (https://platform.claude.com/docs/en/build-with-claude/token-counting),
// with the input_tokens it publishes for each.
const (
	anthropicWeatherTool = `{"name":"get_weather","description":"Get the current weather in a given location","input_schema":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"}},"required":["location"]}}`
	anthropicThinking    = `[
	  {"role":"user","content":"Are there an infinite number of prime numbers such that n mod 4 == 3?"},
	  {"role":"assistant","content":[
	    {"type":"thinking","thinking":"This is a nice number theory question. Let's think about it step by step...","signature":"EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV..."},
	    {"type":"text","text":"Yes, there are infinitely many prime numbers p such that p mod 4 = 3..."}]},
	  {"role":"user","content":"Can you write a formal proof?"}]`
)

func TestMessagesPublishedCounts(t *testing.T) {
	w := testWeigher(t)
	// The estimate must not fall below the published count (a reservation
	// that errs low lets a tenant overrun its limit), nor exceed it by much.
	for _, tc := range []struct {
		name, body string
		published  int64
		maxOver    float64 // largest accepted estimate / published
	}{
		{"basic", `{"model":"claude-sonnet-4-5","max_tokens":1,"system":"You are a scientist","messages":[{"role":"user","content":"Hello, Claude"}]}`, 14, 1.25},
		{"tools", `{"model":"claude-sonnet-4-5","max_tokens":1,"tools":[` + anthropicWeatherTool + `],"messages":[{"role":"user","content":"What's the weather like in San Francisco?"}]}`, 403, 1.1},
		// The guide sends the image as base64; its pixel size is not
		// published, so the URL form (priced at the cap) must cover it.
		{"image of unknown size", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg"}},{"type":"text","text":"Describe this image"}]}]}`, 1551, 1.1},
		{"extended thinking", `{"model":"claude-sonnet-4-5","max_tokens":1,"thinking":{"type":"enabled","budget_tokens":16000},"messages":` + anthropicThinking + `}`, 88, 1.1},
	} {
		e := w.Messages([]byte(tc.body))
		if !e.Parsed {
			t.Fatalf("%s: not parsed", tc.name)
		}
		if e.InputTokens < tc.published || float64(e.InputTokens) > float64(tc.published)*tc.maxOver {
			t.Errorf("%s: InputTokens = %d, want in [%d, %.0f] (published %d)", tc.name, e.InputTokens,
				tc.published, float64(tc.published)*tc.maxOver, tc.published)
		}
	}
}

func TestClaudeImageTokensPublishedExamples(t *testing.T) {
	// "Calculate image costs" of https://platform.claude.com/docs/en/build-with-claude/vision.
	for _, tc := range []struct {
		model      string
		w, h, want int64
	}{
		{"claude-sonnet-4-5", 200, 200, 54},
		{"claude-sonnet-4-5", 1000, 1000, 1334},
		{"claude-sonnet-4-5", 1092, 1092, 1590},
		{"claude-sonnet-4-5", 4000, 3000, claudeMaxImageTokens}, // scaled down to the cap
		{"claude-sonnet-4-5", 1568, 100, 210},                   // long edge at the limit: not scaled
		{"claude-sonnet-4-5", 0, 0, claudeMaxImageTokens},       // unknown size: the cap
		{"claude-opus-4-7", 2000, 2000, 5334},                   // hi-res model: no scaling below 2576 px
		{"claude-opus-4-7", 0, 0, hiResMaxImageTokens},
	} {
		if got := claudeImageTokens(tc.model, tc.w, tc.h); got != tc.want {
			t.Errorf("claudeImageTokens(%s, %d×%d) = %d, want %d", tc.model, tc.w, tc.h, got, tc.want)
		}
	}
}

func TestMessagesBodyShapes(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	w := testWeigher(t)
	enc := w.encoder("claude-sonnet-4-5")
	est := func(body string) int64 {
		t.Helper()
		e := w.Messages([]byte(`{"model":"claude-sonnet-4-5","max_tokens":10,` + body + `}`))
		if !e.Parsed {
			t.Fatalf("not parsed: %s", body)
		}
		return e.InputTokens
	}
	scaled := func(n int64) int64 { return w.scaled("claude-sonnet-4-5", n) }
	empty := est(`"messages":[{"role":"user","content":[]}]`)
	if want := int64(claudeTokensPerMessage + claudeTokensReply); empty != want {
		t.Errorf("empty user message: %d tokens, want %d", empty, want)
	}
	same := []struct{ name, a, b string }{
		{"system string vs text blocks", `"system":"Be brief and exact.","messages":[]`, `"system":[{"type":"text","text":"Be brief and exact.","cache_control":{"type":"ephemeral"}}],"messages":[]`},
		{"content string vs text block", `"messages":[{"role":"user","content":"Hello there"}]`, `"messages":[{"role":"user","content":[{"type":"text","text":"Hello there"}]}]`},
		{"tool_result string vs blocks", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"15 degrees"}]}]`, `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"15 degrees"}]}]}]`},
		{"previous-turn thinking ignored", `"messages":[{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":"next"}]`, `"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"a long chain of thought here","signature":"x"},{"type":"redacted_thinking","data":"QUJDREVGR0hJSktMTU5PUA=="},{"type":"text","text":"ok"}]},{"role":"user","content":"next"}]`},
	}
	for _, tc := range same {
		if a, b := est(tc.a), est(tc.b); a != b {
			t.Errorf("%s: %d vs %d tokens, want equal", tc.name, a, b)
		}
	}
	raw := func(url string) string { return url[strings.Index(url, ",")+1:] }
	for _, tc := range []struct {
		name, content string
		want          int64 // tokens over the empty user message
	}{
		{"base64 PNG 1000×1000", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + raw(pngDataURL(t, 1000, 1000)) + `"}}`, 1334},
		{"base64 PNG 3000×2000 scaled", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + raw(pngDataURL(t, 3000, 2000)) + `"}}`, claudeMaxImageTokens},
		{"URL image", `{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}`, claudeMaxImageTokens},
		{"file image", `{"type":"image","source":{"type":"file","file_id":"file_01"}}`, claudeMaxImageTokens},
		{"garbage base64 image", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!!"}}`, claudeMaxImageTokens},
		{"tool_use", `{"type":"tool_use","id":"t1","name":"get_weather","input":{"location":"Paris"}}`,
			claudeTokensPerToolUse + scaled(countText(enc, "get_weather")+countText(enc, `{"location":"Paris"}`))},
		{"text document", `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The grass is green."},"title":"Facts"}`,
			scaled(countText(enc, "The grass is green.") + countText(enc, "Facts"))},
		{"PDF of 2 pages", `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + fakePDF(2) + `"}}`, 2 * (pageTextTokens + claudeMaxImageTokens)},
		{"URL document", `{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`, 0}, // hidden: the window is reserved
		{"unknown block", `{"type":"container_upload","file_id":"f"}`, ceilDiv(int64(len(`{"type":"container_upload","file_id":"f"}`)), unknownPartBytesPerToken)},
	} {
		got := est(`"messages":[{"role":"user","content":[`+tc.content+`]}]`) - empty
		if got != tc.want {
			t.Errorf("%s: adds %d tokens, want %d", tc.name, got, tc.want)
		}
	}
	// Thinking in the current turn (after the last real user message) counts.
	prev := est(`"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]`)
	cur := est(`"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"let me call the tool now","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]`)
	if cur <= prev {
		t.Errorf("current-turn thinking not counted: %d vs %d", cur, prev)
	}
}

// fakePDF is a base64 PDF skeleton with pages page objects and a page tree.
func fakePDF(pages int) string {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Count ")
	fmt.Fprintf(&b, "%d >> endobj\n", pages)
	for i := range pages {
		fmt.Fprintf(&b, "%d 0 obj << /Type /Page /Parent 2 0 R >> endobj\n", i+3)
	}
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

func TestMessagesTools(t *testing.T) {
	w := testWeigher(t)
	base := w.Messages([]byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[]}`)).InputTokens
	for _, tc := range []struct {
		name, model, extra string
		want               int64
	}{
		{"empty tools: no system prompt", "claude-sonnet-4-5", `"tools":[]`, 0},
		{"bash, auto", "claude-sonnet-4-5", `"tools":[{"type":"bash_20250124","name":"bash"}]`, 346 + 245},
		{"text editor, any", "claude-sonnet-4-5", `"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}],"tool_choice":{"type":"any"}`, 313 + 700},
		{"computer, forced tool", "claude-sonnet-4-5", `"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}],"tool_choice":{"type":"tool","name":"computer"}`, 313 + 735 + 499},
		{"memory, auto", "claude-sonnet-4-5", `"tools":[{"type":"memory_20250818","name":"memory"}]`, 346 + 1000},
		{"Claude 3 Opus, auto", "claude-3-opus-20240229", `"tools":[{"type":"bash_20250124","name":"bash"}]`, 530 + 245},
		{"Claude 3.5 Haiku, any", "claude-3-5-haiku-latest", `"tools":[{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"any"}`, 340 + 245},
	} {
		b := w.Messages([]byte(`{"model":"` + tc.model + `","max_tokens":1,"messages":[],` + tc.extra + `}`)).InputTokens
		if got := b - base; got != tc.want {
			t.Errorf("%s: tools add %d tokens, want %d", tc.name, got, tc.want)
		}
	}
	// A custom tool costs its scaled JSON parts plus the system prompt.
	enc := w.encoder("claude-sonnet-4-5")
	custom := w.Messages([]byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}]}`)).InputTokens
	if want := base + 346 + w.scaled("claude-sonnet-4-5", countText(enc, "f")+countText(enc, "d")+countText(enc, `{"type":"object"}`)) -
		w.scaled("claude-sonnet-4-5", 0); custom != want {
		t.Errorf("custom tool: %d tokens, want %d", custom, want)
	}
}

func TestMessagesOutputAndFlags(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, body    string
		out           int64
		stream, usage bool
	}{
		{"max_tokens", `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[]}`, 1024, false, false},
		{"absent: options default", `{"model":"claude-sonnet-4-5","messages":[]}`, 1000, false, false},
		{"invalid: options default", `{"model":"claude-sonnet-4-5","max_tokens":"lots","messages":[]}`, 1000, false, false},
		{"stream reports usage", `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[],"stream":true}`, 5, true, true},
	} {
		e := w.Messages([]byte(tc.body))
		if e.OutputTokens != tc.out || e.Stream != tc.stream || e.IncludeUsage != tc.usage || e.Model != "claude-sonnet-4-5" {
			t.Errorf("%s: %+v", tc.name, e)
		}
	}
	if e := w.Messages([]byte(`{"model":"claude`)); e.Parsed || e.InputTokens != 8 {
		t.Errorf("truncated body: %+v, want the byte fallback", e)
	}
}

func TestSafetyFactor(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		model string
		want  float64
	}{
		{"gpt-4o", 1}, {"llama-3", 1}, {"claude-sonnet-4-5-20250929", DefaultClaudeSafetyFactor},
		{"claude-3-5-haiku-latest", DefaultClaudeSafetyFactor}, {"anthropic.claude-3-haiku-20240307-v1:0", DefaultClaudeSafetyFactor},
		{"claude-opus-4-7", NewTokenizerClaudeSafetyFactor}, {"claude-sonnet-5", NewTokenizerClaudeSafetyFactor},
	} {
		if got := w.safetyFactor(tc.model); got != tc.want {
			t.Errorf("safetyFactor(%q) = %v, want %v", tc.model, got, tc.want)
		}
	}
	custom, err := New(Options{Models: map[string]Model{"claude-haiku": {SafetyFactor: 1.5}, "my-llama": {SafetyFactor: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := custom.safetyFactor("claude-haiku-4-5"); got != 1.5 {
		t.Errorf("configured factor: %v", got)
	}
	// A factor scales every flavor's text, not only Messages.
	plain := custom.Embeddings([]byte(`{"model":"text-embedding-3-small","input":"hello world, how are you?"}`)).InputTokens
	if got := custom.Embeddings([]byte(`{"model":"my-llama","input":"hello world, how are you?"}`)).InputTokens; got != 2*plain {
		t.Errorf("factor 2 on embeddings: %d, want %d", got, 2*plain)
	}
	for _, bad := range []float64{-1, nanF(), infF()} {
		if _, err := New(Options{Models: map[string]Model{"m": {SafetyFactor: bad}}}); err == nil || !strings.Contains(err.Error(), `"m"`) {
			t.Errorf("SafetyFactor %v: err = %v", bad, err)
		}
	}
}

func nanF() float64 { z := 0.0; return z / z }
func infF() float64 { z := 0.0; return 1 / z }

func TestPDFPages(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	for _, n := range []int{1, 3, 40} {
		if got := pdfPages(fakePDF(n)); got != int64(n) {
			t.Errorf("pdfPages(%d pages) = %d", n, got)
		}
	}
	// A marker split across the 32 KiB read boundary is counted once.
	for shift := -20; shift <= 20; shift++ {
		pad := strings.Repeat("x", 32<<10+shift)
		doc := pad + "/Type /Page >>" + strings.Repeat("y", 40<<10) + "/Type\n/Page\n/Type /Pages"
		if got := pdfPages(base64.StdEncoding.EncodeToString([]byte(doc))); got != 2 {
			t.Errorf("shift %d: pdfPages = %d, want 2", shift, got)
		}
	}
	// No readable page tree: size-based guess, capped.
	if got := pdfPages(base64.StdEncoding.EncodeToString(make([]byte, 3*bytesPerPageGuess))); got != 3 {
		t.Errorf("page guess = %d, want 3", got)
	}
	if got := pdfPages("%%%"); got != 1 {
		t.Errorf("garbage = %d, want 1", got)
	}
}
