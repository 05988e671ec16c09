package weigher

// Unit tests of the sixth adversarial review (2026-12-04): bodies whose
// parts the upstream bills were weighed as nothing, or too low.

import (
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// words16 is 3,000 words, 3,000 o200k_base tokens or more.
var words16 = strings.TrimSpace(strings.Repeat("word ", 3000))

// grows checks that weighing big (kind k) counts at least want input
// tokens more than small, the same body without the 3,000 words.
func grows(t *testing.T, k Kind, name, small, big string, want int64) {
	t.Helper()
	w := testWeigher(t)
	s, b := w.Weigh(k, []byte(small)), w.Weigh(k, []byte(big))
	if !s.Parsed || !b.Parsed {
		t.Fatalf("%s: not parsed: %v %q / %v %q", name, s.Fault, s.FaultDetail, b.Fault, b.FaultDetail)
	}
	if got := b.InputTokens - s.InputTokens; got < want {
		t.Errorf("%s: the words added %d input tokens (%d → %d), want at least %d", name, got, s.InputTokens, b.InputTokens, want)
	}
}

// An image sent with "detail": "original" is read at its full size, in
// 32 px patches up to 10,000; gpt-5.4 priced it as "high" (4096×4096:
// 70 + 4 × 140 = 630 tokens against 10,000). No detail value weighs
// less than "high".
func TestImageDetailOriginalWeighsPatches(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	for _, tc := range []struct {
		model         string
		detail        string
		width, height int64
		want          int64
	}{
		{"gpt-5.4", "original", 4096, 4096, 10_000},      // 128 × 128 patches, capped
		{"gpt-5.4", "original", 1024, 1024, 1024},        // 32 × 32 patches, above high's 630
		{"gpt-5.4", "original", 0, 0, 10_000},            // unknown size: the cap
		{"gpt-5.4", "original", 320000, 1, 10_000},       // a strip: capped, no overflow
		{"gpt-5.4", "ultra", 4096, 4096, 10_000},         // a detail newer than this code
		{"gpt-4.1-mini", "original", 4096, 4096, 16200},  // 10,000 patches × 1.62
		{"gpt-4o-mini", "original", 64, 64, 2833 + 5667}, // high (1 tile) beats 4 patches
	} {
		if got := imageTokens(tc.model, tc.detail, tc.width, tc.height); got != tc.want {
			t.Errorf("imageTokens(%q, %q, %d×%d) = %d, want %d", tc.model, tc.detail, tc.width, tc.height, got, tc.want)
		}
	}
	models := []string{"gpt-5.4", "gpt-5", "gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "o3", "my-model", "claude-sonnet-4-5"}
	sizes := [][2]int64{{0, 0}, {1, 1}, {512, 512}, {2048, 4096}, {10000, 300}, {4096, 4096}}
	for _, m := range models {
		for _, s := range sizes {
			high := imageTokens(m, "high", s[0], s[1])
			for _, d := range []string{"original", "ultra", "HIGH", "5", "{}"} {
				if got := imageTokens(m, d, s[0], s[1]); got < high {
					t.Errorf("imageTokens(%q, %q, %d×%d) = %d, below high's %d", m, d, s[0], s[1], got, high)
				}
			}
		}
	}
	// Through the bodies: chat and Responses read the detail where it is.
	url := pngDataURL(t, 4096, 4096)
	chat := func(detail string) string {
		return `{"model":"gpt-5.4","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + url + `","detail":` + detail + `}}]}]}`
	}
	grows(t, KindChat, "chat original", chat(`"high"`), chat(`"original"`), 10_000-630)
	grows(t, KindChat, "chat detail not a string", chat(`"high"`), chat(`{"level":"original"}`), 10_000-630)
	resp := func(detail string) string {
		return `{"model":"gpt-5.4","max_output_tokens":16,"input":[{"role":"user","content":[{"type":"input_image","image_url":"` + url + `","detail":"` + detail + `"}]}]}`
	}
	grows(t, KindResponses, "responses original", resp("high"), resp("original"), 10_000-630)
}

// Anthropic's structured outputs turn the JSON schema of output_config's
// format (or the older output_format) into context the API bills: its
// text was weighed as nothing.
func TestMessagesOutputFormatIsWeighed(t *testing.T) {
	body := func(member, text string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],` + member + `}`
	}
	for _, m := range []string{
		`"output_config":{"format":{"type":"json_schema","schema":{"type":"object","description":"%s"}}}`,
		`"output_format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string","description":"%s"}}}}`,
	} {
		grows(t, KindMessages, m[:16], body(strings.Replace(m, "%s", "hi", 1), ""), body(strings.Replace(m, "%s", words16, 1), ""), 2990)
	}
	// A case variant of the new members is refused, as of any member read.
	if est := testWeigher(t).Weigh(KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[],"Output_Format":{}}`)); est.Fault != FaultCaseVariantKey {
		t.Errorf("Output_Format: fault %v, want case_variant_key", est.Fault)
	}
}

// vLLM's min_tokens makes each completion at least that long, and
// ignore_eos makes it run to max_tokens (to the context window when none
// is named): both were ignored, a body with no maximum reserving the
// model's default (1,000 here) or a learned figure below it.
func TestVLLMOutputFloorIsReserved(t *testing.T) {
	w := testWeigher(t)
	const window = DefaultMaxInputTokens // my-model's: no input or output maximum configured
	for _, tc := range []struct {
		name      string
		kind      Kind
		body      string
		want      int64 // OutputTokens
		defaulted bool
	}{
		{"chat min_tokens, no max", KindChat, `{"model":"my-model","messages":[],"min_tokens":9000}`, 9000, false},
		{"chat min_tokens below the default", KindChat, `{"model":"my-model","messages":[],"min_tokens":10}`, 1000, false},
		{"chat min_tokens as a string", KindChat, `{"model":"my-model","messages":[],"min_tokens":"9000"}`, 9000, false},
		{"chat min_tokens over max_tokens", KindChat, `{"model":"my-model","messages":[],"max_tokens":100,"min_tokens":9000}`, 9000, false},
		{"chat min_tokens, n 2", KindChat, `{"model":"my-model","messages":[],"n":2,"min_tokens":9000}`, 18000, false},
		{"chat ignore_eos, no max", KindChat, `{"model":"my-model","messages":[],"ignore_eos":true}`, window, false},
		{"chat ignore_eos lenient", KindChat, `{"model":"my-model","messages":[],"ignore_eos":"yes"}`, window, false},
		{"chat ignore_eos, max_tokens", KindChat, `{"model":"my-model","messages":[],"max_tokens":50,"ignore_eos":true}`, 50, false},
		{"chat ignore_eos false", KindChat, `{"model":"my-model","messages":[],"ignore_eos":false}`, 1000, true},
		{"completions min_tokens", KindCompletions, `{"model":"my-model","prompt":"hi","max_tokens":10,"min_tokens":700}`, 700, false},
		{"completions min_tokens, no max", KindCompletions, `{"model":"my-model","prompt":"hi","min_tokens":700}`, 1000, false},
		{"completions ignore_eos, null max", KindCompletions, `{"model":"my-model","prompt":"hi","max_tokens":null,"ignore_eos":true}`, window, false},
		// Absent is 16 to vLLM but no cap to llama.cpp and Ollama.
		{"completions ignore_eos, absent max", KindCompletions, `{"model":"my-model","prompt":"hi","ignore_eos":true}`, window, false},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if !est.Parsed || est.OutputTokens != tc.want || est.OutputDefaulted != tc.defaulted {
			t.Errorf("%s: OutputTokens %d (defaulted %v, parsed %v), want %d (defaulted %v)", tc.name, est.OutputTokens, est.OutputDefaulted, est.Parsed, tc.want, tc.defaulted)
		}
	}
}

// An assistant's custom tool call ({"type":"custom","custom":{"name",
// "input"}}) and a function call whose arguments are an object were
// weighed as their framing alone.
func TestChatToolCallShapesAreWeighed(t *testing.T) {
	body := func(call string) string {
		return `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[` + call + `]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`
	}
	for _, c := range []string{
		`{"id":"c","type":"custom","custom":{"name":"f","input":"%s"}}`,
		`{"id":"c","type":"function","function":{"name":"f","arguments":{"q":"%s"}}}`,
	} {
		grows(t, KindChat, c[:30], body(strings.Replace(c, "%s", "hi", 1)), body(strings.Replace(c, "%s", words16, 1)), 2990)
	}
	if est := testWeigher(t).Weigh(KindChat, []byte(body(`{"id":"c","type":"custom","custom":{"name":"f","Input":"x"}}`))); est.Fault != FaultCaseVariantKey {
		t.Errorf("custom.Input: fault %v, want case_variant_key", est.Fault)
	}
}

// LiteLLM's user_config carries a router configuration that can route
// the call to any model it lists: refused as a model outside the body.
func TestUserConfigIsRefused(t *testing.T) {
	w := testWeigher(t)
	for _, k := range []Kind{KindChat, KindResponses, KindCompletions, KindMessages} {
		for _, key := range []string{"user_config", "User_Config", "uſer_config"} {
			body := `{"model":"gpt-4o","max_tokens":1,"messages":[],"` + key + `":{"model_list":[{"model_name":"gpt-4o","litellm_params":{"model":"o1-pro"}}]}}`
			if est := w.Weigh(k, []byte(body)); est.Fault != FaultModelOutsideBody || est.Parsed {
				t.Errorf("kind %v, %s: fault %v (parsed %v), want model_outside_body", k, key, est.Fault, est.Parsed)
			}
		}
	}
}

// Responses input whose values are objects where strings were expected
// (a message's content as one part, a tool output as an object, call
// arguments as an object, a part's text as an object, the input or the
// instructions as one item) weighed as nothing.
func TestResponsesObjectValuesAreWeighed(t *testing.T) {
	body := func(input string) string {
		return `{"model":"gpt-4o","max_output_tokens":16,"input":` + input + `}`
	}
	for _, in := range []string{
		`[{"type":"message","role":"user","content":{"type":"input_text","text":"%s"}}]`,
		`[{"type":"message","role":"user","content":{"note":"%s"}}]`,
		`[{"type":"function_call_output","call_id":"c","output":{"result":"%s"}}]`,
		`[{"type":"function_call","call_id":"c","name":"f","arguments":{"q":"%s"}}]`,
		`[{"type":"custom_tool_call","call_id":"c","name":"f","input":{"q":"%s"}}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_text","text":{"t":"%s"}}]}]`,
		`{"type":"message","role":"user","content":"%s"}`,
		`[{"type":"reasoning","summary":[{"type":"summary_text","text":{"t":"%s"}}]}]`,
	} {
		grows(t, KindResponses, in, body(strings.Replace(in, "%s", "hi", 1)), body(strings.Replace(in, "%s", words16, 1)), 2990)
	}
	instr := func(text string) string {
		return `{"model":"gpt-4o","max_output_tokens":16,"input":"hi","instructions":{"type":"message","role":"developer","content":"` + text + `"}}`
	}
	grows(t, KindResponses, "instructions as one item", instr("hi"), instr(words16), 2990)
}

// A chat message's content given as one object, not a string nor an
// array, weighed as nothing: it is weighed as the part it is, or as its
// JSON text.
func TestChatObjectContentIsWeighed(t *testing.T) {
	body := func(content string) string {
		return `{"model":"gpt-4o","max_tokens":1,"messages":[{"role":"user","content":` + content + `}]}`
	}
	for _, c := range []string{
		`{"type":"text","text":"%s"}`,
		`{"note":"%s"}`,
		`[{"type":"text","text":{"t":"%s"}}]`,
	} {
		grows(t, KindChat, c, body(strings.Replace(c, "%s", "hi", 1)), body(strings.Replace(c, "%s", words16, 1)), 2990)
	}
	url := pngDataURL(t, 2048, 2048)
	img := body(`{"type":"image_url","image_url":{"url":"` + url + `"}}`)
	if est := testWeigher(t).Weigh(KindChat, []byte(img)); est.InputTokens < 765 {
		t.Errorf("one image_url object as content: %d input tokens, want at least 765 (gpt-4o, 2048×2048 high)", est.InputTokens)
	}
}

// An advisor tool (Anthropic's advisor_20260301, OpenRouter's
// openrouter:advisor) or NanoGPT's top-level "advisor" names a second
// model that reads the conversation and is billed at its own rates: the
// body is refused as naming a model outside "model". A function that is
// merely named "advisor" is not.
func TestAdvisorToolsAreRefused(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		kind Kind
		body string
	}{
		{KindMessages, `{"model":"claude-haiku-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"advisor_20260301","name":"advisor","model":"claude-opus-4-7"}]}`},
		{KindChat, `{"model":"openai/gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"openrouter:advisor","parameters":{"model":"anthropic/claude-opus-4.7"}}]}`},
		{KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[],"tools":[{"type":"OpenRouter:Advisor"}]}`},
		{KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[],"tools":[{"type":"openrouter:advi\u0073or"}]}`},
		{KindResponses, `{"model":"gpt-4o-mini","input":"hi","tools":[{"type":"orq:advisor","model":"o1-pro"}]}`},
		{KindChat, `{"model":"gpt-4o-mini","max_tokens":1,"messages":[],"advisor":{"model":"o1-pro","mode":"auto"}}`},
	} {
		if est := w.Weigh(tc.kind, []byte(tc.body)); est.Fault != FaultModelOutsideBody {
			t.Errorf("%.150s: fault %v, want model_outside_body", tc.body, est.Fault)
		}
	}
	ok := `{"model":"gpt-4o-mini","max_tokens":1,"messages":[],"tools":[{"type":"function","function":{"name":"advisor","description":"ask the ADVISOR"}}]}`
	if est := w.Weigh(KindChat, []byte(ok)); est.Fault != FaultNone || !est.Parsed {
		t.Errorf("a function named advisor: fault %v, want none", est.Fault)
	}
}

// OpenRouter's reasoning.max_tokens is a reasoning budget billed as
// output, which a gateway may grant beside the answer's maximum: it was
// not reserved at all.
func TestReasoningMaxTokensIsReserved(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		kind Kind
		body string
		want int64
	}{
		{KindChat, `{"model":"anthropic/claude-sonnet-4.5","max_tokens":100,"messages":[],"reasoning":{"max_tokens":5000}}`, 5100},
		{KindChat, `{"model":"anthropic/claude-sonnet-4.5","max_tokens":100,"n":2,"messages":[],"reasoning":{"max_tokens":"5000"}}`, 10200},
		{KindChat, `{"model":"my-model","messages":[],"reasoning":{"max_tokens":5000}}`, 6000}, // the default 1,000 + 5,000, no longer learnable
		{KindChat, `{"model":"my-model","max_tokens":100,"messages":[],"reasoning":{"effort":"high"}}`, 100},
		{KindResponses, `{"model":"my-model","max_output_tokens":100,"input":"hi","reasoning":{"max_tokens":5000}}`, 5100},
	} {
		est := w.Weigh(tc.kind, []byte(tc.body))
		if est.OutputTokens != tc.want || !est.Parsed {
			t.Errorf("%s: OutputTokens %d (parsed %v), want %d", tc.body, est.OutputTokens, est.Parsed, tc.want)
		}
		if strings.Contains(tc.body, `"max_tokens":5000`) && est.OutputDefaulted {
			t.Errorf("%s: OutputDefaulted, want a fixed reservation", tc.body)
		}
	}
}

// vLLM's mm_processor_kwargs set how many tokens each image becomes by
// the model's own processor rule: hidden context.
func TestMMProcessorKwargsIsHidden(t *testing.T) {
	body := `{"model":"Qwen/Qwen2.5-VL-7B-Instruct","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"max_pixels":50000000}}`
	if est := testWeigher(t).Weigh(KindChat, []byte(body)); !est.ServerContext || est.InputTokens < DefaultMaxInputTokens {
		t.Errorf("mm_processor_kwargs: ServerContext %v, %d input tokens, want the window (%d)", est.ServerContext, est.InputTokens, DefaultMaxInputTokens)
	}
}

// Anthropic content, a system prompt or a tool result given as one block
// (an object, not a string nor an array), and a text block whose text is
// an object, weighed as nothing.
func TestMessagesObjectContentIsWeighed(t *testing.T) {
	for _, b := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":{"type":"text","text":"%s"}}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1,"system":{"type":"text","text":"%s"},"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":{"type":"text","text":"%s"}}]}]}`,
		`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":{"t":"%s"}}]}]}`,
	} {
		grows(t, KindMessages, b[60:110], strings.Replace(b, "%s", "hi", 1), strings.Replace(b, "%s", words16, 1), 2990)
	}
}
