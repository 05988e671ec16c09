package app

// Adversarial tests of adv20 (2026-12-05): Responses request members that
// make an upstream run more model calls, or longer ones, than the body's
// text and maximum show: OpenAI's server-side compaction, and the chat
// sampling members llama.cpp's Responses route hands on to its chat
// route. Each drives llmguard through loopback sockets to an upstream that
// bills what it reads, and fails where it billed more than the bucket held.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// fresh20 is fresh16 with a bucket of burst tokens.
func fresh20(t *testing.T, url string, burst int) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(baseConfig(t, url, fmt.Sprintf(`limits:
  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: %d}
`, burst))))
	if err != nil {
		t.Fatal(err)
	}
	return frozenHarness(t, cfg)
}

// count20 is a JSON number as an int64 (0 for anything else).
func count20(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// throughBucket sends body to path calls times through h and fails t
// when up billed more over them than the bucket held before; a call
// llmguard refuses (any status but 200) is not billed. It returns how
// many calls passed.
func throughBucket(t *testing.T, h *harness, up *billing16, path, body string, calls int) (passed int) {
	t.Helper()
	left := h.tokensLeft()
	before := up.billed.Load()
	for range calls {
		resp, b := h.do(path, body)
		switch {
		case resp.StatusCode == http.StatusOK:
			passed++
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusBadRequest:
			t.Fatalf("%d %.200s", resp.StatusCode, b)
		}
	}
	if billed := up.billed.Load() - before; billed > left {
		t.Errorf("the upstream billed %d tokens through a bucket holding %d (%d of %d calls passed)", billed, left, passed, calls)
	}
	return passed
}

// compactionBill20 bills a Responses call as a server that honours
// context_management's compaction does
// (https://developers.openai.com/api/docs/guides/compaction: "When the
// rendered token count crosses the configured threshold, the server runs
// server-side compaction", in the same call, then "prunes context before
// continuing inference"): below the threshold, the input's words and the
// answer's maximum; at or above it, a compaction pass reading the whole
// input and writing a 1,000-token summary, then the answer reading the
// summary: input + 1,000 more input and 1,000 more output.
func compactionBill20(_ string, body map[string]any) (in, out int64) {
	in, out = words(body["input"]), count20(body["max_output_tokens"])
	cm, _ := body["context_management"].([]any)
	for _, e := range cm {
		entry, _ := e.(map[string]any)
		if entry["type"] == "compaction" && in+out >= count20(entry["compact_threshold"]) {
			return in + 1000, out + 1000
		}
	}
	return in, out
}

// OpenAI's server-side compaction (a Responses context_management
// compaction entry) runs a second model pass in the call once the context
// crosses its compact_threshold: llmguard weighed the body's text alone,
// so a 6,000-word input with a 1,000-token threshold reserved about 6,016
// tokens and was billed 8,016, through a 7,000-token bucket. A body whose
// input and output may reach its threshold (or names none it can read)
// is now hidden context: it reserves the model's largest input.
func TestAdv20ResponsesCompactionIsHidden(t *testing.T) {
	up := startBilling16(t, compactionBill20)
	long := strings.Repeat("word ", 6000)
	// The upstream compacts at the threshold it reads: with none (absent,
	// not a count) it compacts whatever the input.
	for _, tc := range []struct{ name, cm string }{
		{"threshold crossed", `[{"type":"compaction","compact_threshold":1000}]`},
		{"threshold absent", `[{"type":"compaction"}]`},
		{"threshold not a count", `[{"type":"compaction","compact_threshold":"soon"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh20(t, up.url, 7000)
			body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"` + long + `","context_management":` + tc.cm + `}`
			throughBucket(t, h, up, "/v1/responses", body, 3)
		})
	}
	t.Run("threshold above the call", func(t *testing.T) {
		// A threshold the input and output do not reach weighs as before:
		// the call passes and is billed what it was reserved.
		h := fresh20(t, up.url, 7000)
		body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"` + long + `","context_management":[{"type":"compaction","compact_threshold":200000}]}`
		if passed := throughBucket(t, h, up, "/v1/responses", body, 3); passed == 0 {
			t.Errorf("no call passed: a threshold out of reach must not refuse the call")
		}
	})
}

// llamaResponsesBill20 bills a Responses call as llama.cpp's Responses
// route does: it copies every member of the body into the chat request it
// runs (server_chat_convert_responses_to_chatcmpl, tools/server/
// server-chat.cpp: chatcmpl_body = response_body, max_output_tokens
// renamed max_tokens), whose sampling parameters then apply: "n_cmpl"
// (alias "n") completions (make_llama_cmpl_schema), each up to the
// maximum, and "ignore_eos" generating past the end of sequence, here
// 30,000 tokens, to the end of the context.
func llamaResponsesBill20(_ string, body map[string]any) (in, out int64) {
	in, out = words(body["input"]), count20(body["max_output_tokens"])
	if body["ignore_eos"] == true && out == 0 {
		out = 30000
	}
	n := max(count20(body["n_cmpl"]), count20(body["n"]), 1)
	return in, out * n
}

// A Responses body's n_cmpl or n (llama.cpp's count of completions) and
// ignore_eos reach llama.cpp's chat route through its Responses route,
// which copies every member over: llmguard reserved one completion of the
// maximum, so "max_output_tokens":1000 with "n_cmpl":8 (or "n":8)
// reserved about 1,010 tokens and was billed 8,001 — three calls put
// 24,003 through a 20,000-token bucket — and "ignore_eos":true with no
// maximum reserved the model's default of 256 and was billed 30,001. They are reserved as
// the chat route's are (× n_cmpl, n or best_of; ignore_eos with no
// maximum: the model's whole window).
func TestAdv20ResponsesChatSamplingIsReserved(t *testing.T) {
	up := startBilling16(t, llamaResponsesBill20)
	for _, tc := range []struct{ name, extra string }{
		{"n_cmpl", `"max_output_tokens":1000,"n_cmpl":8`},
		{"n", `"max_output_tokens":1000,"n":8`},
		{"ignore_eos", `"ignore_eos":true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fresh20(t, up.url, 20000)
			body := `{"model":"gpt-4o-mini","input":"hi",` + tc.extra + `}`
			throughBucket(t, h, up, "/v1/responses", body, 4)
		})
	}
}

// The native and OpenAI-compatible routes of HuggingFace TGI, LM Studio,
// Ollama and LocalAI, each with a body asking for 100,000 output tokens,
// under a 1,000-token bucket: a route llmguard weighs (LM Studio's
// /api/v0 and Ollama's /v1 OpenAI layer end in a weighed endpoint) is
// refused as too large for it, a route it cannot weigh (TGI's /generate,
// /generate_stream, its root route "/" and SageMaker's /invocations,
// Ollama's /api/chat and /api/generate, LocalAI's /v1/edits) is refused
// unmetered_endpoint; none reaches the upstream, which bills the
// 100,000.
func TestAdv20ServerRoutesAreWeighedOrRefused(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		return words(body["inputs"], body["messages"], body["prompt"], body["input"]), 100000
	})
	h := fresh20(t, up.url, 1000)
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`
	const generate = `{"inputs":"hi","parameters":{"max_new_tokens":100000,"best_of":2,"details":true}}`
	for _, tc := range []struct{ path, body string }{
		{"/generate", generate},            // TGI native
		{"/generate_stream", generate},     // TGI native, streamed
		{"/", generate},                    // TGI's compat route: /generate or /generate_stream by "stream"
		{"/invocations", chat},             // TGI's SageMaker route, which takes chat bodies too
		{"/api/v0/chat/completions", chat}, // LM Studio's REST API
		{"/api/v0/completions", `{"model":"gpt-4o-mini","prompt":"hi","max_tokens":100000}`},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000,"options":{"num_predict":-1}}`}, // Ollama's OpenAI layer
		{"/api/chat", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":-1,"num_ctx":131072}}`},
		{"/api/generate", `{"model":"gpt-4o-mini","prompt":"hi","raw":true,"context":[1,2,3],"options":{"num_predict":-2}}`},
		{"/v1/edits", `{"model":"gpt-4o-mini","instruction":"expand","input":"hi"}`}, // LocalAI
	} {
		before := up.calls.Load()
		resp, b := h.do(tc.path, tc.body)
		if resp.StatusCode == http.StatusOK || up.calls.Load() != before {
			t.Errorf("POST %s: %d %.120s; the upstream was called %d times", tc.path, resp.StatusCode, b, up.calls.Load()-before)
		}
		t.Logf("POST %-26s -> %d %.80s", tc.path, resp.StatusCode, b)
	}
}

// A compaction item passed back in a Responses input (the opaque,
// encrypted output of server-side compaction, which "carries forward key
// prior state and reasoning into the next run") was weighed at one token
// per 4 bytes, as an item of a type llmguard does not read: 2,000 bytes
// reserved about 516 tokens. What it expands to the body does not show;
// this upstream bills it as the 20,000 tokens of state it carries, so one
// call put 20,017 through a 20,000-token bucket. It is hidden context now:
// the call reserves the model's largest input.
func TestAdv20ResponsesCompactionItemIsHidden(t *testing.T) {
	up := startBilling16(t, func(_ string, body map[string]any) (int64, int64) {
		in := int64(1)
		items, _ := body["input"].([]any)
		for _, it := range items {
			if m, _ := it.(map[string]any); m["type"] == "compaction" {
				in += 20000
			}
		}
		return in, count20(body["max_output_tokens"])
	})
	h := fresh20(t, up.url, 20000)
	body := `{"model":"gpt-4o-mini","max_output_tokens":16,"input":[{"type":"compaction","id":"cmp_1","encrypted_content":"` +
		strings.Repeat("gAAAAB", 333) + `"},{"role":"user","content":"and then?"}]}`
	throughBucket(t, h, up, "/v1/responses", body, 2)
}
