package app

// Adversarial tests of the sixth review (2026-12-04): each drives llmguard
// through real loopback sockets to an upstream that bills what the real
// API would for the body it reads, and fails where the upstream billed
// more than the bucket held.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// billing16 answers chat, completions, Responses and Messages calls
// in their own shapes with the usage bill gives for the decoded body
// (input and output tokens), and keeps the total it billed. A body that
// names a top-level member twice, which upstreams read differently (Go's
// the last, others the first), is answered 400 unbilled: what llmguard
// forwards must mean one thing.
type billing16 struct {
	url    string
	billed atomic.Int64
	calls  atomic.Int64
}

func startBilling16(t *testing.T, bill func(path string, body map[string]any) (in, out int64)) *billing16 {
	t.Helper()
	u := &billing16{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		var body map[string]any
		json.Unmarshal(raw, &body)
		if k, twice := topKeyTwice(raw); twice {
			w.WriteHeader(http.StatusBadRequest)
			msg, _ := json.Marshal("member named twice: " + k)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error"}}`, msg)
			return
		}
		in, out := bill(r.URL.Path, body)
		u.billed.Add(in + out)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/messages"):
			fmt.Fprintf(w, `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":%d,"output_tokens":%d}}`, in, out)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`, in, out, in+out)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
		default: // legacy completions
			fmt.Fprintf(w, `{"id":"x","object":"text_completion","model":"gpt-4o-mini","choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// topKeyTwice reports the first top-level member key of the JSON object
// raw that is named twice, if any.
func topKeyTwice(raw []byte) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		k, _ := tok.(string)
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

// callThrough sends body to path calls times through h and fails t when
// u billed more tokens over them than left, what the bucket held before;
// it returns how many calls passed (200). Any status but 200 and 429
// fails t at once.
func (u *billing16) callThrough(t *testing.T, h *harness, path, body string, calls int, left int64) (passed int) {
	t.Helper()
	before := u.billed.Load()
	for range calls {
		resp, b := h.do(path, body)
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%d %.200s", resp.StatusCode, b)
		}
	}
	if billed := u.billed.Load() - before; billed > left {
		t.Errorf("the upstream billed %d tokens through a bucket holding %d (%d of %d calls passed)", billed, left, passed, calls)
	}
	return passed
}

// words is the number of blank-separated words in the strings of v, a
// decoded JSON value: every word of the tests' text is one token or more
// to tiktoken, so it bounds what the upstream bills from below.
func words(v ...any) int64 {
	var b strings.Builder
	for _, e := range v {
		appendStrings(&b, e)
	}
	return int64(len(strings.Fields(b.String())))
}

// fresh16 starts llmguard on the base config (gpt-4o-mini priced, its
// default output reservation 256 tokens) and upstream url, with one
// 20,000-token bucket on a clock that never moves.
func fresh16(t *testing.T, url string) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(baseConfig(t, url, `limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 20000}
`)))
	if err != nil {
		t.Fatal(err)
	}
	return frozenHarness(t, cfg)
}

// words16 is 3,000 words of text.
var words16 = strings.Repeat("word ", 3000)

// pngHeader16 is a data URL of a PNG of width × height px holding its
// signature and header chunk only: what a size is read from.
func pngHeader16(width, height uint32) string {
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], width)
	binary.BigEndian.PutUint32(ihdr[4:], height)
	ihdr[8] = 8 // bit depth; colour type 0 (grey), no interlace
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	chunk := append([]byte("IHDR"), ihdr[:]...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// originalImageTokens is what an image of detail "original" is billed
// (OpenAI's images guide, model sizing behaviour): its 32 px patches at
// full size, at most 10,000, a token each; 0 for anything else.
func originalImageTokens(part map[string]any) int64 {
	url, detail := "", ""
	switch img := part["image_url"].(type) {
	case map[string]any: // chat
		url, _ = img["url"].(string)
		detail, _ = img["detail"].(string)
	case string: // Responses
		url = img
		detail, _ = part["detail"].(string)
	}
	if detail != "original" {
		return 0
	}
	_, data, _ := strings.Cut(url, ";base64,")
	raw, _ := base64.StdEncoding.DecodeString(data)
	cfg, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return 10000
	}
	return min(int64((cfg.Width+31)/32)*int64((cfg.Height+31)/32), 10000)
}

// An image with "detail": "original" (read at full size by gpt-5.4 and
// later) was weighed as "high": a 4096×4096 image reserved 630 tokens for
// gpt-5.4 and was billed 10,000, so a 20,000-token bucket let two calls
// through for 20,0xx tokens billed. It is now weighed by its 32 px
// patches, up to 10,000: one call fits.
func TestAdv16ImageDetailOriginalIsWeighed(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		var in int64
		items, _ := body["messages"].([]any)
		if path == "/v1/responses" {
			items, _ = body["input"].([]any)
		}
		for _, m := range items {
			parts, _ := m.(map[string]any)["content"].([]any)
			for _, p := range parts {
				p := p.(map[string]any)
				if t, ok := p["text"].(string); ok {
					in += words(t)
				}
				in += originalImageTokens(p)
			}
		}
		return in, 1
	})
	img := pngHeader16(4096, 4096)
	for _, tc := range []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"gpt-5.4","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"` + img + `","detail":"original"}}]}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-5.4","max_output_tokens":16,"input":[{"role":"user","content":[{"type":"input_text","text":"what is it?"},{"type":"input_image","image_url":"` + img + `","detail":"original"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			if passed := up.callThrough(t, h, tc.path, tc.body, 5, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// Anthropic's structured outputs (output_config.format, or the older
// output_format) turn the JSON schema into context the API bills: 3,000
// words of schema description reserved nothing, and a 20,000-token bucket
// let seven calls through, billed 21,0xx. The schema is now weighed as
// text.
func TestAdv16AnthropicOutputFormatIsWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["output_config"], body["output_format"]), 1
	})
	for _, tc := range []struct{ name, member string }{
		{"output_config", `"output_config":{"format":{"type":"json_schema","schema":{"type":"object","description":"` + words16 + `"}}}`},
		{"output_format", `"output_format":{"type":"json_schema","schema":{"type":"object","description":"` + words16 + `"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenClaude(t, up.url, "user-tpd", 20000)
			body := `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],` + tc.member + `}`
			const left = 20000 // a fresh bucket on a frozen clock
			if passed := up.callThrough(t, h, "/v1/messages", body, 10, left); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// vLLM's min_tokens (each completion at least that long) and ignore_eos
// (each completion runs to max_tokens, or to the context window when the
// body names none) were ignored: min_tokens 8,000 with no max_tokens
// reserved the default 256 and was billed 8,000 a call (three calls
// through a 20,000-token bucket, 24,0xx billed), and ignore_eos with no
// maximum was billed the window, 128,000 tokens, on a 256-token
// reservation. Both are now reserved: the ignore_eos body can never fit
// this bucket and is refused 429 without a take.
func TestAdv16VLLMOutputFloorIsReserved(t *testing.T) {
	up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
		in := words(body["messages"], body["prompt"])
		out := int64(1)
		if m, ok := body["max_tokens"].(float64); ok {
			out = int64(m)
		}
		if eos, _ := body["ignore_eos"].(bool); eos && body["max_tokens"] == nil {
			out = 128000 - in // the window less the prompt
		}
		if m, ok := body["min_tokens"].(float64); ok {
			out = max(out, int64(m))
		}
		return in, out
	})
	for _, tc := range []struct {
		name, path, body string
		calls            int
		refused          bool // every call is refused 429 (can never fit)
	}{
		{"chat min_tokens", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"min_tokens":8000}`, 5, false},
		{"chat min_tokens over max_tokens", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"max_tokens":10,"min_tokens":8000}`, 5, false},
		{"completions min_tokens", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"write","max_tokens":10,"min_tokens":8000}`, 5, false},
		{"chat ignore_eos", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"write"}],"ignore_eos":true}`, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			passed := up.callThrough(t, h, tc.path, tc.body, tc.calls, h.tokensLeft())
			if tc.refused && passed > 0 {
				t.Errorf("%d of %d calls passed, want each refused", passed, tc.calls)
			}
			if !tc.refused && passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// An assistant's custom tool call (custom.input text) and a function
// call whose arguments are a JSON object were weighed as their framing:
// 3,000 words in either reserved a few tokens, and the conversation,
// billed 3,0xx tokens a call, went seven times through a 20,000-token
// bucket.
func TestAdv16ChatToolCallShapesAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"]), 1
	})
	body := func(call string) string {
		return `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[` + call + `]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`
	}
	for _, tc := range []struct{ name, body string }{
		{"custom", body(`{"id":"c","type":"custom","custom":{"name":"f","input":"` + words16 + `"}}`)},
		{"object arguments", body(`{"id":"c","type":"function","function":{"name":"f","arguments":{"q":"` + words16 + `"}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			if passed := up.callThrough(t, h, "/v1/chat/completions", tc.body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// LiteLLM's user_config carries a router configuration whose model list
// can send the call to a model llmguard never priced: it was forwarded,
// priced as the body's "model". It is refused 400 model_outside_body,
// and the upstream never sees it.
func TestAdv16UserConfigIsRefused(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 1, 1 })
	h := fresh16(t, up.url)
	uc := `"user_config":{"model_list":[{"model_name":"gpt-4o-mini","litellm_params":{"model":"o1-pro"}}]}`
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],` + uc + `}`},
		{"/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"hi",` + uc + `}`},
		{"/v1/completions", `{"model":"gpt-4o-mini","max_tokens":1,"prompt":"hi",` + strings.Replace(uc, "user_config", "User_Config", 1) + `}`},
	} {
		resp, b := h.do(tc.path, tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"model_outside_body"`) {
			t.Errorf("POST %s: %d %.200s, want 400 model_outside_body", tc.path, resp.StatusCode, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times, want none", n)
	}
}

// Responses input items whose values are objects where strings were
// expected (a message's content as one part, a tool output as an object,
// call arguments as an object, the input as one item) weighed as
// nothing: 3,000 words in any went seven times through a 20,000-token
// bucket, billed 21,0xx.
func TestAdv16ResponsesObjectValuesAreWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["input"], body["instructions"]), 1
	})
	for _, tc := range []struct{ name, input string }{
		{"content part object", `[{"type":"message","role":"user","content":{"type":"input_text","text":"` + words16 + `"}}]`},
		{"content object", `[{"type":"message","role":"user","content":{"note":"` + words16 + `"}}]`},
		{"output object", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":{"result":"` + words16 + `"}}]`},
		{"arguments object", `[{"type":"function_call","call_id":"c","name":"f","arguments":{"q":"` + words16 + `"}}]`},
		{"input one item", `{"type":"message","role":"user","content":"` + words16 + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":` + tc.input + `}`
			if passed := up.callThrough(t, h, "/v1/responses", body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// A chat message's content given as one object (not a string, not an
// array of parts) weighed as nothing: 3,000 words in it went seven times
// through a 20,000-token bucket, billed 21,0xx. It is weighed as the part
// it is, or as its JSON text.
func TestAdv16ChatObjectContentIsWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"]), 1
	})
	for _, tc := range []struct{ name, content string }{
		{"text part", `{"type":"text","text":"` + words16 + `"}`},
		{"other object", `{"note":"` + words16 + `"}`},
		{"text as an object", `[{"type":"text","text":{"t":"` + words16 + `"}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh16(t, up.url)
			body := `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":` + tc.content + `}]}`
			if passed := up.callThrough(t, h, "/v1/chat/completions", body, 10, h.tokensLeft()); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}

// An advisor tool names a second model that reads the whole
// conversation and writes advice, billed at its own rates (Anthropic's
// advisor_20260301, OpenRouter's openrouter:advisor): such a body was
// forwarded and priced as its executor model alone. It is refused 400
// model_outside_body, and the upstream never sees it.
func TestAdv16AdvisorToolIsRefused(t *testing.T) {
	up := startBilling16(t, func(string, map[string]any) (int64, int64) { return 1, 1 })
	h := frozenClaude(t, up.url, "user-tpd", 20000)
	body := `{"model":"claude-haiku-4-5","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"advisor_20260301","name":"advisor","model":"claude-opus-4-7"}]}`
	if resp, b := h.do("/v1/messages", body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "names models beside") {
		t.Errorf("advisor_20260301: %d %.200s, want 400 model_outside_body", resp.StatusCode, b)
	}
	oa := fresh16(t, up.url)
	body = `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"openrouter:advisor","parameters":{"model":"anthropic/claude-opus-4.7"}}]}`
	if resp, b := oa.do("/v1/chat/completions", body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"code":"model_outside_body"`) {
		t.Errorf("openrouter:advisor: %d %.200s, want 400 model_outside_body", resp.StatusCode, b)
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times, want none", n)
	}
}

// OpenRouter's reasoning.max_tokens grants a thinking model a reasoning
// budget billed as output: a body with max_tokens 100 and a 6,000-token
// budget reserved 100 and was billed 6,100 a call, so four calls went
// through a 20,000-token bucket (24,4xx billed). The budget is now
// reserved on top of the answer's maximum.
func TestAdv16ReasoningBudgetIsReserved(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		m, _ := body["max_tokens"].(float64)
		out := int64(m)
		if r, ok := body["reasoning"].(map[string]any); ok {
			if b, ok := r["max_tokens"].(float64); ok {
				out += int64(b) // the thinking ran its whole budget
			}
		}
		return words(body["messages"]), out
	})
	h := fresh16(t, up.url)
	body := `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"think"}],"reasoning":{"max_tokens":6000}}`
	if passed := up.callThrough(t, h, "/v1/chat/completions", body, 5, h.tokensLeft()); passed == 0 {
		t.Errorf("no call passed: the case tests nothing")
	}
}

// Anthropic content given as one block object (not a string nor an
// array) weighed as nothing: 3,000 words in it went seven times through
// a 20,000-token bucket.
func TestAdv16AnthropicObjectContentIsWeighed(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["messages"], body["system"]), 1
	})
	for _, tc := range []struct{ name, body string }{
		{"content", `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":{"type":"text","text":"` + words16 + `"}}]}`},
		{"system", `{"model":"claude-sonnet-4-5","max_tokens":1,"system":{"type":"text","text":"` + words16 + `"},"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenClaude(t, up.url, "user-tpd", 20000)
			const left = 20000 // a fresh bucket on a frozen clock
			if passed := up.callThrough(t, h, "/v1/messages", tc.body, 10, left); passed == 0 {
				t.Errorf("no call passed: the case tests nothing")
			}
		})
	}
}
