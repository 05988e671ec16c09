package app

// Adversarial tests of adv25 (2026-12-05). Each drives llmguard through
// loopback sockets to an upstream that bills what it reads, and fails
// where it billed more than the bucket held.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmguard/llmguard/config"
)

// ollamaChatBill25 bills a chat call as Ollama's OpenAI-compatible route
// does: its request type reads the output maximum from max_tokens alone
// (openai.ChatCompletionRequest in ollama/ollama's openai/openai.go has
// no max_completion_tokens; Go's encoding/json drops the member), and a
// call naming none generates until the model stops, here at the model's
// own maximum (modelMaxOutput16k). llama.cpp's server reads the same
// way (n_predict, else max_tokens: params_from_json_cmpl), as do
// TabbyAPI (max_tokens or its alias max_length) and DeepSeek's API.
func ollamaChatBill25(_ string, body map[string]any) (in, out int64) {
	out = modelMaxOutput16k
	if v, ok := body["max_tokens"].(float64); ok && v > 0 {
		out = min(out, int64(v))
	}
	return words(body["messages"]), out
}

// TestAdv25PinnedChatBoundsAServerReadingMaxTokens: output_reservation.pin
// wrote a chat request's reservation as max_completion_tokens whatever the
// upstream, and an OpenAI-compatible server that reads only max_tokens
// (Ollama, llama.cpp, TabbyAPI) ignored it and wrote up to the model's
// maximum: 16,384-token answers through a 10,000-token bucket that pin
// promises never to bill past. The same for a cap_output limit lowering a
// chat request that names no maximum. llmguard now writes the maximum a
// chat request names none of as max_tokens to an upstream that is not
// OpenAI's own API (upstreams[].chat_output_field to choose).
func TestAdv25PinnedChatBoundsAServerReadingMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		name, tail, body string
		burst            int64
	}{
		{name: "pin", tail: "output_reservation: {pin: true}\n" + userTokensLimit("user-tpd", 10000), burst: 10000,
			body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi"}]}`},
		// A max_completion_tokens that names no maximum is rewritten in
		// place, and max_tokens, which the server reads, is added beside
		// it: rewritten alone, it bounded nothing there.
		{name: "pin, max_completion_tokens null", tail: "output_reservation: {pin: true}\n" + userTokensLimit("user-tpd", 10000), burst: 10000,
			body: `{"model":"gpt-4o-mini","max_completion_tokens":null,"messages":[{"role":"user","content":"say hi"}]}`},
		{name: "pin, max_completion_tokens 0", tail: "output_reservation: {pin: true}\n" + userTokensLimit("user-tpd", 10000), burst: 10000,
			body: `{"model":"gpt-4o-mini","max_completion\u005ftokens":0,"messages":[{"role":"user","content":"say hi"}]}`},
		// A bucket below the 4,096-token default reservation: cap_output
		// lowers it to what the bucket holds and writes that maximum.
		{name: "cap_output", tail: "limits:\n  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 3000, cap_output: true}\n", burst: 3000,
			body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi"}]}`},
		{name: "cap_output, max_completion_tokens 5000", tail: "limits:\n  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 3000, cap_output: true}\n", burst: 3000,
			body: `{"model":"gpt-4o-mini","max_completion_tokens":5000,"messages":[{"role":"user","content":"say hi"}]}`},
		// A body that names max_tokens has it rewritten in place, no
		// second member added (the upstream refuses a member named twice).
		{name: "cap_output, max_tokens 5000", tail: "limits:\n  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 3000, cap_output: true}\n", burst: 3000,
			body: `{"model":"gpt-4o-mini","max_tokens":5000,"messages":[{"role":"user","content":"say hi"}]}`},
		{name: "cap_output, both 5000", tail: "limits:\n  - {name: user-tpd, scope: user, unit: tokens, rate: 1, per: 24h, burst: 3000, cap_output: true}\n", burst: 3000,
			body: `{"model":"gpt-4o-mini","max_completion_tokens":5000,"max_tokens":5000,"messages":[{"role":"user","content":"say hi"}]}`},
	} {
		body := tc.body
		t.Run(tc.name, func(t *testing.T) {
			up := startBilling16(t, ollamaChatBill25)
			cfg, err := config.Parse([]byte(twoFlavorHead(up.url) + tc.tail))
			if err != nil {
				t.Fatal(err)
			}
			passed := sixCalls(t, frozenHarness(t, cfg), body)
			if billed := up.billed.Load(); billed > tc.burst {
				t.Errorf("the upstream billed %d tokens through a bucket of %d (%d of 6 calls passed)", billed, tc.burst, passed)
			}
		})
	}
}

// TestAdv25ChatOutputFieldChosen: upstreams[].chat_output_field names the
// member a pinned chat request's maximum is written in, for a gateway
// that hands bodies unchanged to OpenAI's reasoning models (which refuse
// max_tokens): the maximum reaches the upstream there, and no max_tokens
// beside it (OpenAI refuses the two together).
func TestAdv25ChatOutputFieldChosen(t *testing.T) {
	var field, other int
	up := startBilling16(t, func(_ string, body map[string]any) (in, out int64) {
		out = modelMaxOutput16k
		if v, ok := body["max_completion_tokens"].(float64); ok && v > 0 {
			out = min(out, int64(v))
			field++
		}
		if _, ok := body["max_tokens"]; ok {
			other++
		}
		return words(body["messages"]), out
	})
	head := strings.Replace(twoFlavorHead(up.url), "no_key: true}", "no_key: true, chat_output_field: max_completion_tokens}", 1)
	cfg, err := config.Parse([]byte(head + "output_reservation: {pin: true}\n" + userTokensLimit("user-tpd", 10000)))
	if err != nil {
		t.Fatal(err)
	}
	h := frozenHarness(t, cfg)
	resp, b := h.do("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"say hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.200s", resp.StatusCode, b)
	}
	if field != 1 || other != 0 || up.billed.Load() > 10000 {
		t.Errorf("max_completion_tokens in %d of 1 calls, max_tokens in %d, billed %d through a bucket of 10000", field, other, up.billed.Load())
	}
	if _, err := config.Parse([]byte(strings.Replace(head, "chat_output_field: max_completion_tokens", "chat_output_field: max_output_tokens", 1) + userTokensLimit("user-tpd", 10000))); err == nil ||
		!strings.Contains(err.Error(), "chat_output_field") {
		t.Errorf("chat_output_field: max_output_tokens: %v, want a config error naming the field", err)
	}
}

// TestMaxCompletionTokensBoundsAMaxTokensServer: without pin or
// cap_output, a chat body that names only max_completion_tokens is
// reserved that maximum, and a server that reads only max_tokens (Ollama,
// llama.cpp, TabbyAPI) ignored it and wrote up to the model's maximum:
// "max_completion_tokens": 100 was reserved ~100 tokens a call and billed
// 16,384, past a 10,000-token bucket (adv25's lead). llmguard now copies
// the maximum into max_tokens for such a server; OpenAI's own API, which
// refuses the two together, gets the body as sent.
func TestMaxCompletionTokensBoundsAMaxTokensServer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		mirrored   bool // max_tokens reaches the upstream
	}{
		{"max_completion_tokens 100", `{"model":"gpt-4o-mini","max_completion_tokens":100,"messages":[{"role":"user","content":"say hi"}]}`, true},
		{"escaped key", `{"model":"gpt-4o-mini","max_completion\u005ftokens":100,"messages":[{"role":"user","content":"say hi"}]}`, true},
		// Forms the weigher reads as 100 (review: ParseInt of the text let
		// them through unmirrored).
		{"as a string", `{"model":"gpt-4o-mini","max_completion_tokens":"100","messages":[{"role":"user","content":"say hi"}]}`, true},
		{"as 100.0", `{"model":"gpt-4o-mini","max_completion_tokens":100.0,"messages":[{"role":"user","content":"say hi"}]}`, true},
		// A max_tokens holding no count (-1 is "no limit" to llama.cpp and
		// Ollama) is replaced, not left beside the one reserved for.
		{"max_tokens -1", `{"model":"gpt-4o-mini","max_completion_tokens":100,"max_tokens":-1,"messages":[{"role":"user","content":"say hi"}]}`, true},
		{"max_tokens null", `{"model":"gpt-4o-mini","max_tokens":null,"max_completion_tokens":100,"messages":[{"role":"user","content":"say hi"}]}`, true},
		// A body naming max_tokens is sent as it is: no member named twice.
		{"both named", `{"model":"gpt-4o-mini","max_completion_tokens":100,"max_tokens":100,"messages":[{"role":"user","content":"say hi"}]}`, true},
		// An upstream that reads max_completion_tokens (OpenAI's own API,
		// or chat_output_field says so) gets the body as sent.
		{"max_completion_tokens upstream", `{"model":"gpt-4o-mini","max_completion_tokens":100,"messages":[{"role":"user","content":"say hi"}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			var mu sync.Mutex
			up := startBilling16(t, func(path string, body map[string]any) (int64, int64) {
				mu.Lock()
				seen = append(seen, fmt.Sprint(body["max_tokens"]))
				mu.Unlock()
				return ollamaChatBill25(path, body)
			})
			head := twoFlavorHead(up.url)
			if !tc.mirrored {
				head = strings.Replace(head, "no_key: true}", "no_key: true, chat_output_field: max_completion_tokens}", 1)
			}
			cfg, err := config.Parse([]byte(head + userTokensLimit("user-tpd", 10000)))
			if err != nil {
				t.Fatal(err)
			}
			passed := sixCalls(t, frozenHarness(t, cfg), tc.body)
			want := "100"
			if !tc.mirrored {
				want = "<nil>"
			} else if billed := up.billed.Load(); billed > 10000 {
				t.Errorf("the upstream billed %d tokens through a bucket of 10000 (%d of 6 calls passed)", billed, passed)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range seen {
				if v != want {
					t.Errorf("the upstream read max_tokens %s, want %s", v, want)
				}
			}
		})
	}
}

// sixCalls sends body to h's chat route six times and returns how many
// passed; an answer other than 200 or 429, or none passing, fails t.
func sixCalls(t *testing.T, h *harness, body string) (passed int) {
	t.Helper()
	for i := range 6 {
		resp, b := h.do("/v1/chat/completions", body)
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("call %d: %d %.200s", i, resp.StatusCode, b)
		}
	}
	if passed == 0 {
		t.Fatal("no call passed")
	}
	return passed
}
