package app

// Adversarial tests of adv19 (2026-12-05): request features added to the
// OpenAI and Anthropic APIs in 2025-2026 that bill more than a call's
// visible text and maximum suggest.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// compactionUsage19 is the usage of a Messages call that compacted its
// context (context_management's compact_20260112 edit), as the compaction
// guide's example reports it
// (https://platform.claude.com/docs/en/build-with-claude/compaction-threshold): the
// top-level figures are the message's sampling only; the compaction
// iteration, which read the whole conversation and wrote its summary, is
// in "iterations", and the call is billed the sum: 203,000 input and
// 4,500 output tokens.
const compactionUsage19 = `{"input_tokens":23000,"output_tokens":1000,"iterations":[` +
	`{"type":"compaction","input_tokens":180000,"output_tokens":3500,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},` +
	`{"type":"message","input_tokens":23000,"output_tokens":1000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}]}`

// compactionBilled19 is what compactionUsage19 bills, in tokens.
const compactionBilled19 = 203000 + 4500

// Server-side compaction (Anthropic's context_management
// compact_20260112) samples twice in one call, and the usage's top-level
// figures leave the compaction iteration out: llmguard charged 24,000
// tokens for a call billed 207,500, so a 400,000-token bucket let some 16
// such calls through, 3.3M tokens billed. The usage's iterations are now
// summed: the call is charged what it is billed, JSON or streamed.
func TestAdv19CompactionIterationsAreCharged(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			return // the probe's GET /v1/models
		}
		calls.Add(1)
		raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if !strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[{"type":"compaction","content":"Summary of the conversation: a user asked."},{"type":"text","text":"Based on our conversation, yes."}],"stop_reason":"end_turn","usage":%s}`, compactionUsage19)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []struct{ typ, data string }{
			{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":23000,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"compaction","content":"Summary of the conversation: a user asked."}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Based on our conversation, yes."}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":1}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":` + compactionUsage19 + `}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.typ, e.data)
		}
	}))
	t.Cleanup(srv.Close)
	const body = `{"model":"claude-opus-4-6","max_tokens":2000,%s"context_management":{"edits":[{"type":"compact_20260112"}]},` +
		`"messages":[{"role":"user","content":"Is it done?"}]}`
	for _, tc := range []struct{ name, stream string }{
		{"json", ""},
		{"stream", `"stream":true,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenClaude(t, srv.URL, "user-tpd", 400000)
			left := func() int64 { // the bucket, in Anthropic's header
				v := h.probe().Get("anthropic-ratelimit-tokens-remaining")
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("anthropic-ratelimit-tokens-remaining = %q: %v", v, err)
				}
				return n
			}
			before := left()
			resp, b := h.do("/v1/messages", fmt.Sprintf(body, tc.stream), "anthropic-beta", "compact-2026-01-12")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if charged := before - left(); charged != compactionBilled19 {
				t.Errorf("charged %d tokens for a call billed %d", charged, compactionBilled19)
			}
		})
	}
	// A body whose estimated input reaches its trigger may compact: it
	// is hidden context (x-llmguard-estimate: partial, the model's largest
	// input reserved); below it, its own estimate.
	for _, tc := range []struct {
		name, trigger, want string
	}{
		{"trigger reached", `,"trigger":{"type":"input_tokens","value":50000}`, "partial"},
		{"default trigger", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := frozenClaude(t, srv.URL, "user-tpd", 2000000) // the hidden reservation: claude-opus-4-6's 1M window
			long := strings.Repeat("word ", 60000)
			resp, b := h.do("/v1/messages", `{"model":"claude-opus-4-6","max_tokens":2000,"context_management":{"edits":[{"type":"compact_20260112"`+tc.trigger+`}]},`+
				`"messages":[{"role":"user","content":"`+long+`"}]}`, "anthropic-beta", "compact-2026-01-12")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("x-llmguard-estimate"); got != tc.want {
				t.Errorf("x-llmguard-estimate = %q, want %q", got, tc.want)
			}
		})
	}
	if calls.Load() != 4 {
		t.Errorf("the upstream saw %d calls, want 4", calls.Load())
	}
}
