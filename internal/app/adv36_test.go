package app

// Adversarial tests of adv36 (2026-12-06): Messages bodies the upstream
// bills past what llmguard weighed.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/ledger"
)

// blockWriter is a lenient Anthropic-compatible upstream that writes
// every string of the messages into its prompt, however deep their
// blocks nest (as a gateway that flattens a tool_result's content into
// text does), and bills one input token a word of it. It reports what it
// billed, so the tokens it billed are what llmguard must have reserved.
type blockWriter struct{ billed atomic.Int64 }

func (u *blockWriter) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return // the probe's GET
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var body struct {
		Messages any `json:"messages"`
	}
	json.Unmarshal(raw, &body)
	var prompt strings.Builder
	appendStrings(&prompt, body.Messages)
	in := int64(len(strings.Fields(prompt.String())))
	u.billed.Add(in + 10)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":10}}`, in)
}

// TestAdv36DeepToolResultsAreReserved: 3,000 words at the bottom of six
// nested tool_result blocks. llmguard's block walk stopped five deep and
// weighed what lay below as nothing: each call reserved some 120 tokens
// (22 input + 100 output), and a 10,000-token bucket let four of five
// calls through, billed 12,124 (the fourth admitted while the bucket held
// 910). Now the deep blocks are weighed by their text,
// as hidden context, and the bucket admits what it holds.
func TestAdv36DeepToolResultsAreReserved(t *testing.T) {
	up := &blockWriter{}
	srv := httptest.NewServer(http.HandlerFunc(up.serve))
	t.Cleanup(srv.Close)
	inner := fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat("word ", 3000))
	for i := range 6 {
		inner = fmt.Sprintf(`{"type":"tool_result","tool_use_id":"toolu_%d","content":[%s]}`, i, inner)
	}
	body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[` +
		`{"role":"user","content":"Read it."},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_5","name":"read","input":{}}]},` +
		`{"role":"user","content":[` + inner + `]}]}`
	// The hidden-context reservation is the model's largest input: keep it
	// within the bucket, so that a call can pass at all.
	cfg, err := config.Parse([]byte(claudeConfig(srv.URL, "user-tokens", 10000) +
		"models:\n  claude-sonnet-4-5: {max_input_tokens: 4000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := frozenHarness(t, cfg)
	before := up.billed.Load()
	passed := 0
	for range 5 {
		resp, b := h.do("/v1/messages", body)
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%d %.300s", resp.StatusCode, b)
		}
	}
	if billed := up.billed.Load() - before; billed > 10000 {
		t.Errorf("the upstream billed %d tokens through a 10,000-token bucket (%d of 5 calls passed)", billed, passed)
	}
	if passed == 0 {
		t.Errorf("no call passed: each bills some 3,000 tokens")
	}
}

// TestAdv36AudioURLReservedAtAudioPrices: a chat request to
// gpt-4o-audio-preview ($2.50 text, $40 audio per million input tokens)
// whose audio comes as a vLLM "audio_url" part, which the upstream
// fetches and reports as audio tokens. llmguard weighed the part as a
// text request's hidden context: 128,000 tokens at the text price,
// $0.32, so a $6 budget let two calls through, each billed 100,000 audio
// tokens ($4.00): $8.00 spent. Now the request is priced as audio, its
// reservation ($5.12) is what the window can bill, and the budget admits
// one.
func TestAdv36AudioURLReservedAtAudioPrices(t *testing.T) {
	h, file := startAudio(t, 6, "")
	body := `{"model":"gpt-4o-audio-preview","max_completion_tokens":100,"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Transcribe this."},{"type":"audio_url","audio_url":{"url":"https://example.com/talk.wav"}}]}]}`
	passed := 0
	for range 3 {
		resp, got := h.do("/v1/chat/completions", body, "x-mock-completion-tokens", "10", "x-mock-audio-input-tokens", "100000")
		switch resp.StatusCode {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%d %.300s", resp.StatusCode, got)
		}
	}
	if err := h.app.Ledger.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.ReadFiles(file)
	if err != nil {
		t.Fatal(err)
	}
	var spent int64
	for _, r := range recs {
		spent += r.CostMicroUSD
	}
	if spent > 6_000_000 {
		t.Errorf("%d of 3 calls passed and spent %d µUSD of a $6 budget", passed, spent)
	}
	if passed == 0 {
		t.Errorf("no call passed: the reservation ($5.12) fits the budget")
	}
}
