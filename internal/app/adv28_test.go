package app

// Adversarial tests of adv28 (2026-12-06): hidden context on the
// Messages API that the body carries but llmguard weighed as nothing.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// thinkingKeeper is an Anthropic upstream serving a model that keeps the
// thinking blocks of every earlier assistant turn in its context (Claude
// Opus 4.5 and later, Sonnet 4.6 and later: the extended-thinking guide):
// it bills one input token a word of the messages' text and thinking,
// and a block whose display was "omitted" (empty text) one token per 4
// bytes of its signature, which carries the thinking encrypted. It
// reports what it billed, so the tokens it billed are what llmguard must
// have reserved.
type thinkingKeeper struct{ billed atomic.Int64 }

func (u *thinkingKeeper) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		return // the probe's GET
	}
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	json.Unmarshal(raw, &body)
	var in int64
	for _, m := range body.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			in += int64(len(strings.Fields(text)))
			continue
		}
		var blocks []struct{ Type, Text, Thinking, Signature string }
		json.Unmarshal(m.Content, &blocks)
		for _, b := range blocks {
			switch {
			case b.Type == "thinking" && b.Thinking == "":
				in += int64(len(b.Signature) / 4)
			default:
				in += int64(len(strings.Fields(b.Text + " " + b.Thinking)))
			}
		}
	}
	u.billed.Add(in + 10)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-7","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":10}}`, in)
}

// TestAdv28EarlierThinkingIsReserved: a conversation with Claude Opus 4.7
// hands back each earlier turn's thinking block, as the API asks; the
// model keeps them all in its context and bills them as input. llmguard
// weighed an earlier turn's thinking as nothing (and a signature, where
// Opus 4.7's default "omitted" display puts the thinking, as nothing in
// any turn): three turns of 3,000 thinking tokens each were reserved some
// 40 tokens, and a 20,000-token bucket let three such calls through,
// billed 27,000+. Now each call reserves its thinking and the bucket
// admits two, billed within it.
func TestAdv28EarlierThinkingIsReserved(t *testing.T) {
	up := &thinkingKeeper{}
	srv := httptest.NewServer(http.HandlerFunc(up.serve))
	t.Cleanup(srv.Close)
	visible := func(i int) string {
		return fmt.Sprintf(`{"type":"thinking","thinking":%q,"signature":"c2ln"}`, strings.Repeat("prime ", 3000))
	}
	omitted := func(i int) string {
		return fmt.Sprintf(`{"type":"thinking","thinking":"","signature":%q}`, strings.Repeat("QUJD", 3000))
	}
	for _, tc := range []struct {
		name  string
		block func(int) string
	}{
		{"summarized", visible},
		{"omitted", omitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var msgs strings.Builder
			for i := range 3 {
				fmt.Fprintf(&msgs, `{"role":"user","content":"Question %d?"},{"role":"assistant","content":[%s,{"type":"text","text":"Answer."}]},`, i, tc.block(i))
			}
			body := `{"model":"claude-opus-4-7","max_tokens":100,"thinking":{"type":"adaptive"},"messages":[` + msgs.String() + `{"role":"user","content":"And the last?"}]}`
			h := frozenClaude(t, srv.URL, "user-tpd", 20000)
			before := up.billed.Load()
			passed := 0
			for range 4 {
				resp, b := h.do("/v1/messages", body)
				switch resp.StatusCode {
				case http.StatusOK:
					passed++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("%d %.300s", resp.StatusCode, b)
				}
			}
			if billed := up.billed.Load() - before; billed > 20000 {
				t.Errorf("the upstream billed %d tokens through a 20,000-token bucket (%d of 4 calls passed)", billed, passed)
			}
			if passed == 0 {
				t.Errorf("no call passed: each bills some 9,000 tokens")
			}
		})
	}
}

// TestAdv28OmittedThinkingStreamKeepsTheReservation: a Messages stream
// whose thinking block is displayed "omitted" (Opus 4.7's default: an
// empty thinking text, then only a signature_delta) bills the thinking as
// output the stream never shows. When no message_delta reports the output
// (a gateway that drops it, sends it as a string, or none), llmguard
// charged the text it counted: 1 output token for a call that thought
// 3,000 tokens. Such a signature now marks output llmguard cannot count,
// so the stream keeps at least its output reservation (max_tokens 4,000),
// as a redacted_thinking block does; with a reported usage, that usage.
func TestAdv28OmittedThinkingStreamKeepsTheReservation(t *testing.T) {
	for _, tc := range []struct {
		name, delta string
		min, max    float64
	}{
		{"no output reported", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null}}`, 4000, 4000},
		{"output as a string", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":"3002"}}`, 4000, 4000},
		{"output reported", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3002}}`, 3002, 3002},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					return
				}
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				for _, e := range []struct{ typ, data string }{
					{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-7","usage":{"input_tokens":12,"output_tokens":1}}}`},
					{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
					{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + strings.Repeat("QUJD", 500) + `"}}`},
					{"content_block_stop", `{"type":"content_block_stop","index":0}`},
					{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
					{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Yes."}}`},
					{"content_block_stop", `{"type":"content_block_stop","index":1}`},
					{"message_delta", tc.delta},
					{"message_stop", `{"type":"message_stop"}`},
				} {
					fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.typ, e.data)
				}
			}))
			t.Cleanup(srv.Close)
			h := frozenClaude(t, srv.URL, "user-tpd", 100000)
			resp, b := h.do("/v1/messages", `{"model":"claude-opus-4-7","max_tokens":4000,"stream":true,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"Is it prime?"}]}`)
			if resp.StatusCode != http.StatusOK || !strings.Contains(b, "message_stop") {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if got := outputSettled(t, h); got < tc.min || got > tc.max {
				t.Errorf("charged %v output tokens, want %v to %v", got, tc.min, tc.max)
			}
		})
	}
}
